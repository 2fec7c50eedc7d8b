"""The ``flat_hooks`` integration: our command hooks as flat entries, each naming its command directly.

LoongSuite Pilot calls this layout "flat" (its "nested" one is Claude Code's groups, ``settings_hooks``).
In JSON or JSONC (:class:`FlatHooksJson`, Cursor's ``~/.cursor/hooks.json``) an event's entries are a plain
list, ``{"version": 1, "hooks": {"<event>": [{"command": ...}]}}``, edited in place with the rest of the
text kept byte for byte; keys the file needs (Cursor's ``version``) are added only when absent, never
changed. In TOML (:class:`FlatHooksToml`, Kimi CLI's ``~/.kimi/config.toml``) they are one array of tables,
``[[hooks]] event = "<event>" command = "..."``, ours in one marked block at the end. Either way only our
own entries (the command runs our hook script) are added, stripped or reported on.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from collector.deploy.file_edit import Check, file_text
from collector.deploy.hookcmd import hook_command, is_our_command
from collector.deploy.jsonc import add_member
from collector.deploy.model import DeployError
from collector.deploy.settings_hooks import BLOCK_END, BLOCK_START, SettingsHooksJson
from collector.deploy.tomltext import loads as load_toml
from collector.deploy.tomltext import toml_string, without_block
from collector.paths import Paths


class FlatHooksJson(SettingsHooksJson):
    """``hooks.<event> = [{<command_key>, <timeout_key>?, matcher?}]`` in JSON or JSONC."""

    def __init__(self, agent: str, spec: dict[str, Any], paths: Paths, hook_script: Path | None) -> None:
        super().__init__(agent, {**spec, "layout": "list"}, paths, hook_script)
        self.defaults: dict[str, Any] = dict(spec.get("defaults", {}))

    def desired_hook(self, event: str) -> dict[str, Any]:
        hook: dict[str, Any] = {self.command_key: hook_command(self._paths, self.agent, event, self._hook_script)}
        if "timeout" in self.spec:
            timeout = self.spec["timeout"]
            hook[self.timeout_key] = int(timeout) if float(timeout).is_integer() else timeout
        if event in self.matcher_events:
            hook["matcher"] = self.spec["matcher"]
        return hook

    def apply(self, current: bytes | None) -> bytes | None:
        text = self._load(current)
        for key, value in self.defaults.items():
            root = self._root(text)
            if root.member(key) is None:
                text = add_member(text, root, key, value)
        return super().apply(text.encode("utf-8"))

    def check(self, current: bytes | None) -> Check:
        found = super().check(current)
        if found.level != "ok" or current is None:
            return found
        data = self._root(self._load(current)).value()
        absent = [key for key in self.defaults if key not in data]
        if absent:
            return Check("partial", "keys missing: " + ", ".join(absent))
        return found


class FlatHooksToml(FlatHooksJson):
    """``[[hooks]]`` tables (``<event_key> = "<event>"`` and the hook's fields) in one marked block at the
    end of a TOML file."""

    def __init__(self, agent: str, spec: dict[str, Any], paths: Paths, hook_script: Path | None) -> None:
        super().__init__(agent, spec, paths, hook_script)
        self.event_key = str(spec.get("event_key", "event"))
        self.name_key = spec.get("name_key")

    def desired_entry(self, event: str) -> dict[str, Any]:
        named = {str(self.name_key): f"agent-collector-{event}"} if self.name_key else {}
        return {**named, self.event_key: event, **self.desired_hook(event)}

    def _load(self, current: bytes | None) -> str:
        return "" if current is None else file_text(current, self.path)

    def _block(self, newline: str) -> str:
        lines = [BLOCK_START]
        for event in self.events:
            lines.append("[[hooks]]")
            for key, value in self.desired_entry(event).items():
                rendered = toml_string(value) if isinstance(value, str) else json.dumps(value)
                lines.append(f"{toml_string(key)} = {rendered}")
        lines.append(BLOCK_END)
        return newline.join(lines) + newline

    def _entries(self, text: str) -> list[Any]:
        data = load_toml(text, str(self.path))
        hooks = data.get("hooks", [])
        if not isinstance(hooks, list):
            raise DeployError(f'{self.path}: "hooks" is not an array of tables; left untouched')
        return hooks

    def apply(self, current: bytes | None) -> bytes | None:
        text = self._load(current)
        self._entries(text)
        newline = "\r\n" if "\r\n" in text else "\n"
        base = text if not text or text.endswith("\n") else text + newline
        new = base + (newline if base.strip() else "") + self._block(newline)
        try:
            tomllib.loads(new)
        except tomllib.TOMLDecodeError as exc:
            raise DeployError(
                f"{self.path}: cannot add [[hooks]] tables ({exc}); is hooks defined inline? left untouched"
            ) from None
        return new.encode("utf-8")

    def strip(self, current: bytes | None) -> bytes | None:
        if current is None:
            return None
        stripped = without_block(self._load(current), BLOCK_START, BLOCK_END)
        return current if stripped is None else stripped.encode("utf-8")

    def check(self, current: bytes | None) -> Check:
        if current is None:
            return Check("missing", f"{self.path} does not exist")
        entries = self._entries(self._load(current))
        missing: list[str] = []
        outdated: list[str] = []
        for event in self.events:
            want = self.desired_entry(event)
            if want in entries:
                continue
            ours = any(isinstance(e, dict) and e.get(self.event_key) == event
                       and is_our_command(e.get(self.command_key)) for e in entries)
            (outdated if ours else missing).append(event)
        if not missing and not outdated:
            return Check("ok", f"hooks for {len(self.events)} events in place")
        if len(missing) == len(self.events):
            return Check("missing", "none of our hooks are there")
        if missing:
            return Check("partial", "hooks missing for " + ", ".join(missing))
        return Check("outdated", "our hooks differ from this version's (path, timeout): " + ", ".join(outdated))
