"""The ``toml_notify`` integration: a top-level ``notify = [argv...]`` in the agent's TOML config (Codex).

The agent runs that one program when a turn completes and appends its JSON as the last argument; the line
is added without touching the rest of the file, and a ``notify`` that is not ours is never replaced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collector.deploy.file_edit import Check, file_text
from collector.deploy.hookcmd import hook_argv, is_our_command
from collector.deploy.model import Conflict, DeployError
from collector.deploy.tomltext import insert_top_level_line, remove_span, toml_array, top_level
from collector.deploy.tomltext import loads as load_toml
from collector.paths import Paths


class TomlNotify:
    """A top-level ``notify = [argv...]`` in a TOML config; the agent appends its JSON as last argv."""

    def __init__(self, agent: str, spec: dict[str, Any], paths: Paths, hook_script: Path | None) -> None:
        self.agent = agent
        self.spec = spec
        self.path = paths.expand(spec["file"])
        self.key: str = spec["key"]
        self.desired = hook_argv(paths, agent, spec["event"], hook_script)

    def _text(self, current: bytes | None) -> str:
        return "" if current is None else file_text(current, self.path)

    def apply(self, current: bytes | None) -> bytes | None:
        text = self._text(current)
        data = load_toml(text, str(self.path))
        if self.key in data:
            if data[self.key] == self.desired:
                return current
            raise Conflict(
                f"{self.key} is already set to {data[self.key]!r} (not ours); left as is. Codex runs one "
                f"notify program, so turn-complete notifications will not reach agent-collector; the hooks "
                f"still report sessions, prompts and tools"
            )
        line = f"{self.key} = {toml_array(self.desired)}"
        new = insert_top_level_line(text, line)
        parsed = load_toml(new, str(self.path))
        if parsed.get(self.key) != self.desired or {k: v for k, v in parsed.items() if k != self.key} != data:
            raise DeployError(f"{self.path}: adding {self.key} would change other settings; left untouched")
        return new.encode("utf-8")

    def strip(self, current: bytes | None) -> bytes | None:
        if current is None:
            return None
        text = self._text(current)
        data = load_toml(text, str(self.path))
        if not is_our_command(data.get(self.key)):
            return current
        spans, _ = top_level(text)
        for span in spans:
            if span.key == self.key:
                return remove_span(text, span).encode("utf-8")
        return current

    def check(self, current: bytes | None) -> Check:
        data = load_toml(self._text(current), str(self.path))
        value = data.get(self.key)
        if value == self.desired:
            return Check("ok", f"{self.key} runs the agent-collector hook")
        if value is None:
            return Check("missing", f"no {self.key} in {self.path}")
        if is_our_command(value):
            return Check("outdated", f"{self.key} runs an older agent-collector hook command")
        return Check("conflict", f"{self.key} belongs to another program: {value!r}")
