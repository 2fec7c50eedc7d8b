"""The ``telemetry_settings`` integration (opt-in, ``install --telemetry``): the agent's own OpenTelemetry
switched on and pointed at our OTLP receiver (docs/otlp-receiver.md), in the agent's config file.

The spec (an agent definition's ``telemetry``) names the file, its ``format`` (``json`` or ``toml``) and
``settings``: dotted keys and the values we set, ``${endpoint}`` standing for the receiver's URL
(``http://127.0.0.1:<ingest port>``). No value holds a secret: the receiver takes OTLP without the token
from a client of the daemon's own user.

JSON or JSONC (Claude Code's ``env``, Qwen Code's ``telemetry``): each key set in place, the rest of the text
kept; ours are the keys holding exactly our value. A value the user had under one of our keys (their own
endpoint) is saved before we overwrite it (:mod:`collector.deploy.telemetry_choice`), put back by
``strip`` and forwarded to (:mod:`collector.exporters.passthrough`). TOML (Codex's ``[otel]``): the
tables in one marked block at the end; a file with an ``[otel]`` of the user's own is a conflict, left
alone (their exporter stays theirs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collector.deploy.file_edit import Check, file_text
from collector.deploy.json_edit import parse_json, set_dotted
from collector.deploy.jsonc import find, remove_member
from collector.deploy.model import Conflict, DeployError
from collector.deploy.tomltext import loads as load_toml
from collector.deploy.tomltext import toml_string, without_block
from collector.paths import Paths

KIND = "telemetry_settings"
BLOCK_START = "# >>> agent-collector telemetry (managed: `agent-collector uninstall` removes this block) >>>"
BLOCK_END = "# <<< agent-collector telemetry <<<"


def endpoint(paths: Paths) -> str:
    from collector.deploy.http_plugin import configured_port

    return f"http://127.0.0.1:{configured_port(paths)}"


def resolved(spec: dict[str, Any], url: str) -> dict[str, Any]:
    """The spec's settings with ``${endpoint}`` replaced (in strings, at any depth)."""
    def sub(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("${endpoint}", url)
        if isinstance(value, dict):
            return {k: sub(v) for k, v in value.items()}
        return value

    return {key: sub(value) for key, value in dict(spec.get("settings", {})).items()}


def dotted_get(data: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


class TelemetryJson:
    """Our telemetry keys in a JSON settings file; ``saved``: the user's values they replaced."""

    def __init__(self, spec: dict[str, Any], paths: Paths, url: str, saved: dict[str, Any]) -> None:
        self.spec = spec
        self.path = paths.expand(spec["file"])
        self.settings = resolved(spec, url)
        self.saved = {k: v for k, v in saved.items() if k in self.settings}
        self.comments = spec.get("format") == "jsonc"

    def _text(self, current: bytes | None) -> str:
        return "{}\n" if current is None or not current.strip() else file_text(current, self.path)

    def _data(self, text: str) -> dict[str, Any]:
        root = parse_json(text, self.path, self.comments)
        if root.kind != "object":
            raise DeployError(f"{self.path}: the top level is not an object; left untouched")
        value = root.value()
        assert isinstance(value, dict)
        return value

    def apply(self, current: bytes | None) -> bytes | None:
        text = self._text(current)
        self._data(text)
        for dotted, value in self.settings.items():
            text = set_dotted(text, self.path, self.comments, dotted.split("."), value)
        return text.encode("utf-8")

    def marker(self) -> str:
        """The key whose value says the settings are ours: the first holding our endpoint."""
        raw = dict(self.spec.get("settings", {}))
        return next((k for k, v in raw.items() if isinstance(v, str) and "${endpoint}" in v), next(iter(raw)))

    def strip(self, current: bytes | None) -> bytes | None:
        if current is None:
            return None
        text = self._text(current)
        if dotted_get(self._data(text), self.marker()) != self.settings[self.marker()]:
            return current  # not pointed at us: the values there (a "1", an "otlp") are the user's
        changed = False
        for dotted, value in self.settings.items():
            if dotted_get(self._data(text), dotted) != value:
                continue
            changed = True
            keys = dotted.split(".")
            if dotted in self.saved:
                text = set_dotted(text, self.path, self.comments, keys, self.saved[dotted])
                continue
            text = _remove_dotted(text, self.path, keys, self.comments)
        return text.encode("utf-8") if changed else current

    def check(self, current: bytes | None) -> Check:
        if current is None:
            return Check("missing", f"{self.path} does not exist")
        data = self._data(self._text(current))
        wrong = [k for k, v in self.settings.items() if dotted_get(data, k) != v]
        if not wrong:
            return Check("ok", f"telemetry to {self.settings_endpoint()} in place")
        if len(wrong) == len(self.settings):
            return Check("missing", "none of our telemetry settings are there")
        return Check("partial", "telemetry settings not set: " + ", ".join(wrong))

    def settings_endpoint(self) -> str:
        return next((v for v in self.settings.values() if isinstance(v, str) and "127.0.0.1" in v), "our receiver")


def _remove_dotted(text: str, path: Path, keys: list[str], comments: bool) -> str:
    """Remove the member at ``keys``, and each parent it leaves empty."""
    for depth in range(len(keys), 0, -1):
        root = parse_json(text, path, comments)
        parent = root if depth == 1 else find(root, keys[: depth - 1])
        if parent is None or parent.kind != "object":
            return text
        member = parent.member(keys[depth - 1])
        if member is None:
            return text
        if depth < len(keys) and (member.value.kind != "object" or member.value.members):
            return text
        text = remove_member(text, parent, keys[depth - 1])
    return text


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_inline(v)}" for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return toml_string(value)
    return str(value)


class TelemetryToml:
    """Our tables (``[otel]``) in one marked block at the end of a TOML file."""

    def __init__(self, spec: dict[str, Any], paths: Paths, url: str) -> None:
        self.spec = spec
        self.path = paths.expand(spec["file"])
        self.settings = resolved(spec, url)

    def _text(self, current: bytes | None) -> str:
        return "" if current is None else file_text(current, self.path)

    def _tables(self) -> dict[str, dict[str, Any]]:
        tables: dict[str, dict[str, Any]] = {}
        for dotted, value in self.settings.items():
            table, _, key = dotted.partition(".")
            tables.setdefault(table, {})[key] = value
        return tables

    def _block(self, newline: str) -> str:
        lines = [BLOCK_START]
        for table, values in self._tables().items():
            lines.append(f"[{table}]")
            lines += [f"{key} = {_inline(value)}" for key, value in values.items()]
        lines.append(BLOCK_END)
        return newline.join(lines) + newline

    def apply(self, current: bytes | None) -> bytes | None:
        text = self._text(current)
        data = load_toml(text, str(self.path))
        taken = [t for t in self._tables() if t in data]
        if taken:
            raise Conflict(f"{self.path}: [{taken[0]}] is yours (your own exporter); left as it is, telemetry "
                           "not pointed at agent-collector")
        newline = "\r\n" if "\r\n" in text else "\n"
        base = text if not text or text.endswith("\n") else text + newline
        new = base + (newline if base.strip() else "") + self._block(newline)
        load_toml(new, str(self.path))
        return new.encode("utf-8")

    def strip(self, current: bytes | None) -> bytes | None:
        if current is None:
            return None
        stripped = without_block(self._text(current), BLOCK_START, BLOCK_END)
        return current if stripped is None else stripped.encode("utf-8")

    def check(self, current: bytes | None) -> Check:
        if current is None:
            return Check("missing", f"{self.path} does not exist")
        text = self._text(current)
        data = load_toml(text, str(self.path))
        if BLOCK_START not in text:
            if any(t in data for t in self._tables()):
                return Check("conflict", f"{self.path}: its [otel] is the user's own")
            return Check("missing", "our telemetry block is not there")
        wrong = [k for k, v in self.settings.items() if dotted_get(data, k) != v]
        if wrong:
            return Check("outdated", "our telemetry block differs from this version's: " + ", ".join(wrong))
        return Check("ok", "telemetry block in place")
