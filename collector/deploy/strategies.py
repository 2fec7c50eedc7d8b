"""One edit per integration kind and file: apply our entries to a baseline, strip them, check them.

Every edit is a pure function of bytes (``None`` = the file does not exist), so the engine can plan,
dry-run, restore and verify without caring which kind it holds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from collector.deploy import jsonc, tomltext
from collector.deploy.hookcmd import ASSET_MARKER, hook_argv, hook_command, is_our_command, is_our_hook
from collector.deploy.model import Conflict, DeployError, NotImplementedKind
from collector.paths import Paths, project_root


@dataclass(frozen=True, slots=True)
class Check:
    level: str  # ok | missing | partial | outdated | conflict
    hint: str


class FileEdit(Protocol):
    path: Path
    spec: dict[str, Any]

    def apply(self, current: bytes | None) -> bytes | None: ...

    def strip(self, current: bytes | None) -> bytes | None: ...

    def check(self, current: bytes | None) -> Check: ...


def _text(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DeployError(f"{path}: not UTF-8 text ({exc}); left untouched") from None


def _parse(text: str, path: Path, comments: bool) -> jsonc.Node:
    try:
        return jsonc.parse(text, comments=comments)
    except jsonc.JsoncError as exc:
        kind = "JSONC" if comments else "JSON"
        raise DeployError(f"{path}: not valid {kind} ({exc}); left untouched") from None


def _set_dotted(text: str, path: Path, comments: bool, keys: list[str], value: Any) -> str:
    root = _parse(text, path, comments)
    node = root
    for depth, key in enumerate(keys):
        if node.kind != "object":
            raise DeployError(f"{path}: {'.'.join(keys[:depth])} is not an object; left untouched")
        member = node.member(key)
        if member is None:
            nested: Any = value
            for inner in reversed(keys[depth + 1 :]):
                nested = {inner: nested}
            return jsonc.add_member(text, node, key, nested)
        node = member.value
    if node.value() == value:
        return text
    return jsonc.replace_value(text, node, value)


# ------------------------------------------------------------------------------------ settings hooks


class SettingsHooksJson:
    """Command hooks under ``hooks.<Event>`` in JSON or JSONC. Layout ``groups`` (Claude style):
    ``[{matcher?, hooks: [{type: command, command, timeout}]}]``; layout ``list`` (Copilot CLI): the hooks
    themselves, ``[{type: command, <command_key>, <timeout_key>}]``. The spec's ``command_key`` and
    ``timeout_key`` name the hook's fields."""

    def __init__(self, agent: str, spec: dict[str, Any], paths: Paths, hook_script: Path | None) -> None:
        self.agent = agent
        self.spec = spec
        self.path = paths.expand(spec["file"])
        self.comments = spec["format"] == "jsonc"
        self.events: list[str] = list(spec["events"])
        self.matcher_events = set(spec.get("matcher_events", []))
        self.settings: dict[str, Any] = dict(spec.get("settings", {}))
        self.grouped = spec.get("layout", "groups") == "groups"
        self.command_key = str(spec.get("command_key", "command"))
        self.timeout_key = str(spec.get("timeout_key", "timeout"))
        self._paths = paths
        self._hook_script = hook_script

    def desired_hook(self, event: str) -> dict[str, Any]:
        hook: dict[str, Any] = {"type": "command"}
        if self.spec.get("hook_name"):
            hook["name"] = f"agent-collector-{event}"
        hook[self.command_key] = hook_command(self._paths, self.agent, event, self._hook_script)
        if "timeout" in self.spec:
            timeout = self.spec["timeout"]
            hook[self.timeout_key] = int(timeout) if float(timeout).is_integer() else timeout
        return hook

    def desired_group(self, event: str) -> dict[str, Any]:
        """The item we add to ``hooks.<event>``: a group holding our hook, or (list layout) the hook."""
        if not self.grouped:
            return self.desired_hook(event)
        group: dict[str, Any] = {}
        if event in self.matcher_events:
            group["matcher"] = self.spec["matcher"]
        group["hooks"] = [self.desired_hook(event)]
        return group

    def is_ours(self, hook: Any) -> bool:
        return isinstance(hook, dict) and is_our_command(hook.get(self.command_key))

    def hooks_of(self, item: Any) -> list[Any]:
        """The hooks one item of ``hooks.<event>`` holds."""
        if not self.grouped:
            return [item]
        hooks = item.get("hooks") if isinstance(item, dict) else None
        return hooks if isinstance(hooks, list) else []

    def _load(self, current: bytes | None) -> str:
        if current is None or not current.strip():
            return "{}\n"
        return _text(current, self.path)

    def _root(self, text: str) -> jsonc.Node:
        root = _parse(text, self.path, self.comments)
        if root.kind != "object":
            raise DeployError(f"{self.path}: the top level is not an object; left untouched")
        hooks = root.member("hooks")
        if hooks is not None and hooks.value.kind != "object":
            raise DeployError(f'{self.path}: "hooks" is not an object; left untouched')
        return root

    def apply(self, current: bytes | None) -> bytes | None:
        text = self._load(current)
        root = self._root(text)
        hooks = root.member("hooks")
        if hooks is None:
            text = jsonc.add_member(text, root, "hooks", {e: [self.desired_group(e)] for e in self.events})
        else:
            for event in self.events:
                hooks_node = jsonc.find(self._root(text), ["hooks"])
                assert hooks_node is not None
                member = hooks_node.member(event)
                if member is None:
                    text = jsonc.add_member(text, hooks_node, event, [self.desired_group(event)])
                elif member.value.kind != "array":
                    raise DeployError(f'{self.path}: "hooks.{event}" is not a list; left untouched')
                elif not self._event_in_place(member.value.value(), event):
                    text = jsonc.append_item(text, member.value, self.desired_group(event))
        for dotted, value in self.settings.items():
            text = _set_dotted(text, self.path, self.comments, dotted.split("."), value)
        return text.encode("utf-8")

    def _event_in_place(self, groups: Any, event: str) -> bool:
        want = self.desired_group(event)
        if not self.grouped:
            return any(item == want for item in groups) if isinstance(groups, list) else False
        for group in groups if isinstance(groups, list) else []:
            if not isinstance(group, dict) or group.get("matcher") != want.get("matcher"):
                continue
            if any(hook == want["hooks"][0] for hook in group.get("hooks") or []):
                return True
        return False

    def strip(self, current: bytes | None) -> bytes | None:
        if current is None:
            return None
        text = self._load(current)
        root = self._root(text)
        hooks = root.member("hooks")
        if hooks is None:
            return current
        changed = False
        for event in [m.key for m in hooks.value.members]:
            removed_here = False
            while True:
                groups = jsonc.find(self._root(text), ["hooks", event])
                if groups is None or groups.kind != "array":
                    break
                edit = _strip_one(text, groups) if self.grouped else self._strip_listed(text, groups)
                if edit is None:
                    break
                text, removed_here = edit, True
            if removed_here:
                changed = True
                hooks_node = jsonc.find(self._root(text), ["hooks"])
                groups = jsonc.find(self._root(text), ["hooks", event])
                if hooks_node is not None and groups is not None and not groups.items:
                    text = jsonc.remove_member(text, hooks_node, event)
        if not changed:
            return current
        root = self._root(text)
        hooks = root.member("hooks")
        if hooks is not None and not hooks.value.members:
            text = jsonc.remove_member(text, root, "hooks")
        return text.encode("utf-8")

    def _strip_listed(self, text: str, hooks: jsonc.Node) -> str | None:
        """Remove the last of our hooks from a list-layout ``hooks.<event>``; None when none is ours."""
        ours = [i for i, item in enumerate(hooks.items) if self.is_ours(item.value())]
        return jsonc.remove_item(text, hooks, ours[-1]) if ours else None

    def check(self, current: bytes | None) -> Check:
        if current is None:
            return Check("missing", f"{self.path} does not exist")
        root = self._root(self._load(current))
        hooks = root.value().get("hooks") or {}
        missing: list[str] = []
        outdated: list[str] = []
        for event in self.events:
            groups = hooks.get(event)
            if self._event_in_place(groups, event):
                continue
            ours = any(self.is_ours(h) for g in (groups if isinstance(groups, list) else [])
                       for h in self.hooks_of(g))
            (outdated if ours else missing).append(event)
        bad_settings = [k for k, v in self.settings.items() if _dotted_get(root.value(), k) != v]
        if not missing and not outdated and not bad_settings:
            return Check("ok", f"hooks for {len(self.events)} events in place")
        if len(missing) == len(self.events):
            return Check("missing", "none of our hooks are there")
        if missing or bad_settings:
            parts = []
            if missing:
                parts.append("hooks missing for " + ", ".join(missing))
            if bad_settings:
                unset = ", ".join(f"{k}={self.settings[k]!r}" for k in bad_settings)
                parts.append(f"settings not set: {unset}")
            return Check("partial", "; ".join(parts))
        differ = ", ".join(outdated)
        return Check("outdated", f"our hooks differ from this version's (path, timeout): {differ}")


def _dotted_get(data: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _strip_one(text: str, groups: jsonc.Node) -> str | None:
    """Remove one of our hooks (or a whole group holding only ours); None when nothing is ours."""
    for gi, group in enumerate(groups.items):
        if group.kind != "object":
            continue
        member = group.member("hooks")
        if member is None or member.value.kind != "array":
            continue
        items = member.value.items
        ours = [hi for hi, item in enumerate(items) if is_our_hook(item.value())]
        if not ours:
            continue
        if len(ours) == len(items):
            return jsonc.remove_item(text, groups, gi)
        return jsonc.remove_item(text, member.value, ours[-1])
    return None


BLOCK_START = "# >>> agent-collector hooks (managed: `agent-collector uninstall` removes this block) >>>"
BLOCK_END = "# <<< agent-collector hooks <<<"


class SettingsHooksToml(SettingsHooksJson):
    """The same hooks as ``[[hooks.<Event>]]`` tables in one marked block at the end of a TOML file."""

    def _load(self, current: bytes | None) -> str:
        return "" if current is None else _text(current, self.path)

    def _block(self, newline: str) -> str:
        lines = [BLOCK_START]
        for event in self.events:
            group = self.desired_group(event)
            lines.append(f"[[hooks.{event}]]")
            if "matcher" in group:
                lines.append(f"matcher = {tomltext.toml_string(group['matcher'])}")
            lines.append(f"[[hooks.{event}.hooks]]")
            for key, value in group["hooks"][0].items():
                rendered = tomltext.toml_string(value) if isinstance(value, str) else json.dumps(value)
                lines.append(f"{key} = {rendered}")
        lines.append(BLOCK_END)
        return newline.join(lines) + newline

    def apply(self, current: bytes | None) -> bytes | None:
        text = self._load(current)
        tomltext.loads(text, str(self.path))
        newline = "\r\n" if "\r\n" in text else "\n"
        base = text
        if base and not base.endswith("\n"):
            base += newline
        new = base + (newline if base.strip() else "") + self._block(newline)
        try:
            import tomllib

            tomllib.loads(new)
        except tomllib.TOMLDecodeError as exc:
            raise DeployError(
                f"{self.path}: cannot add [[hooks.*]] tables ({exc}); are hooks defined inline? "
                "left untouched"
            ) from None
        return new.encode("utf-8")

    def strip(self, current: bytes | None) -> bytes | None:
        if current is None:
            return None
        text = self._load(current)
        span = tomltext.find_block(text, BLOCK_START, BLOCK_END)
        if span is None:
            return current
        return (text[: span[0]] + text[span[1] :]).encode("utf-8")

    def check(self, current: bytes | None) -> Check:
        if current is None:
            return Check("missing", f"{self.path} does not exist")
        data = tomltext.loads(self._load(current), str(self.path))
        hooks = data.get("hooks")
        if not isinstance(hooks, dict):
            hooks = {}
        missing = [e for e in self.events if not self._event_in_place(hooks.get(e), e)]
        if not missing:
            return Check("ok", f"hooks for {len(self.events)} events in place")
        if len(missing) == len(self.events):
            return Check("missing", "none of our hooks are there")
        return Check("partial", "hooks missing for " + ", ".join(missing))


# ------------------------------------------------------------------------------------- toml notify


class TomlNotify:
    """A top-level ``notify = [argv...]`` in a TOML config; the agent appends its JSON as last argv."""

    def __init__(self, agent: str, spec: dict[str, Any], paths: Paths, hook_script: Path | None) -> None:
        self.agent = agent
        self.spec = spec
        self.path = paths.expand(spec["file"])
        self.key: str = spec["key"]
        self.desired = hook_argv(paths, agent, spec["event"], hook_script)

    def _text(self, current: bytes | None) -> str:
        return "" if current is None else _text(current, self.path)

    def apply(self, current: bytes | None) -> bytes | None:
        text = self._text(current)
        data = tomltext.loads(text, str(self.path))
        if self.key in data:
            if data[self.key] == self.desired:
                return current
            raise Conflict(
                f"{self.key} is already set to {data[self.key]!r} (not ours); left as is. Codex runs one "
                f"notify program, so turn-complete notifications will not reach agent-collector; the hooks "
                f"still report sessions, prompts and tools"
            )
        line = f"{self.key} = {tomltext.toml_array(self.desired)}"
        new = tomltext.insert_top_level_line(text, line)
        parsed = tomltext.loads(new, str(self.path))
        if parsed.get(self.key) != self.desired or {k: v for k, v in parsed.items() if k != self.key} != data:
            raise DeployError(f"{self.path}: adding {self.key} would change other settings; left untouched")
        return new.encode("utf-8")

    def strip(self, current: bytes | None) -> bytes | None:
        if current is None:
            return None
        text = self._text(current)
        data = tomltext.loads(text, str(self.path))
        if not is_our_command(data.get(self.key)):
            return current
        spans, _ = tomltext.top_level(text)
        for span in spans:
            if span.key == self.key:
                return tomltext.remove_span(text, span).encode("utf-8")
        return current

    def check(self, current: bytes | None) -> Check:
        data = tomltext.loads(self._text(current), str(self.path))
        value = data.get(self.key)
        if value == self.desired:
            return Check("ok", f"{self.key} runs the agent-collector hook")
        if value is None:
            return Check("missing", f"no {self.key} in {self.path}")
        if is_our_command(value):
            return Check("outdated", f"{self.key} runs an older agent-collector hook command")
        return Check("conflict", f"{self.key} belongs to another program: {value!r}")


# ------------------------------------------------------------------------------------ plugin files


def render_asset(asset: str, agent: str, paths: Paths) -> bytes:
    source = project_root() / "integrations" / asset
    try:
        template = source.read_text("utf-8")
    except OSError as exc:
        raise DeployError(f"asset {source} cannot be read: {exc.strerror or exc}") from None
    if ASSET_MARKER not in template:
        raise DeployError(f"asset {source} lacks the {ASSET_MARKER!r} marker")
    text = template.replace("@@SPOOL_DIR@@", json.dumps(str(paths.spool_dir.absolute())))
    text = text.replace("@@AGENT_ID@@", json.dumps(agent))
    return text.encode("utf-8")


class ManagedFile:
    """A whole file that is ours (a plugin we drop into a folder the agent loads).

    Its content is rendered on first use, so removing it works even when the asset is gone."""

    def __init__(self, agent: str, spec: dict[str, Any], path: Path, render: Callable[[], bytes]) -> None:
        self.agent = agent
        self.spec = spec
        self.path = path
        self._render = render
        self._content: bytes | None = None

    @property
    def content(self) -> bytes:
        if self._content is None:
            self._content = self._render()
        return self._content

    def _ours(self, current: bytes) -> bool:
        return ASSET_MARKER.encode() in current

    def apply(self, current: bytes | None) -> bytes | None:
        if current is not None and not self._ours(current):
            raise Conflict(f"{self.path} exists and was not written by agent-collector (the user's own?); not replaced")
        return self.content

    def strip(self, current: bytes | None) -> bytes | None:
        if current is not None and self._ours(current):
            return None
        return current

    def check(self, current: bytes | None) -> Check:
        if current is None:
            return Check("missing", f"{self.path} does not exist")
        if current == self.content:
            return Check("ok", "plugin file in place")
        if self._ours(current):
            return Check("outdated", "plugin file is from another agent-collector version or was edited")
        return Check("conflict", f"{self.path} is someone else's file")


def dropin_edits(agent: str, spec: dict[str, Any], paths: Paths) -> list[FileEdit]:
    target = spec.get("target") or Path(spec["asset"]).name
    path = paths.expand(spec["dir"]) / target
    return [ManagedFile(agent, spec, path, lambda: render_asset(spec["asset"], agent, paths))]


class PluginListJson:
    """A plugin spec (``file://…`` of our asset copy) in a list inside a JSON/JSONC config."""

    def __init__(self, agent: str, spec: dict[str, Any], paths: Paths, plugin_uri: str) -> None:
        self.agent = agent
        self.spec = spec
        self.path = paths.expand(spec["file"])
        self.comments = spec["format"] == "jsonc"
        self.keys = spec["list_key"].split(".")
        self.uri = plugin_uri

    def _load(self, current: bytes | None) -> str:
        return "{}\n" if current is None or not current.strip() else _text(current, self.path)

    def _list(self, text: str) -> jsonc.Node | None:
        root = _parse(text, self.path, self.comments)
        node = jsonc.find(root, self.keys)
        if node is not None and node.kind != "array":
            raise DeployError(f"{self.path}: {'.'.join(self.keys)} is not a list; left untouched")
        return node

    def apply(self, current: bytes | None) -> bytes | None:
        text = self._load(current)
        node = self._list(text)
        if node is None:
            text = _set_dotted(text, self.path, self.comments, self.keys, [self.uri])
        elif self.uri not in node.value():
            text = jsonc.append_item(text, node, self.uri)
        return text.encode("utf-8")

    def strip(self, current: bytes | None) -> bytes | None:
        if current is None:
            return None
        text = self._load(current)
        changed = False
        while True:
            node = self._list(text)
            if node is None:
                break
            ours = [i for i, item in enumerate(node.items) if _is_our_plugin_spec(item.value())]
            if not ours:
                break
            text, changed = jsonc.remove_item(text, node, ours[-1]), True
        if not changed:
            return current
        node = self._list(text)
        parent = jsonc.find(_parse(text, self.path, self.comments), self.keys[:-1])
        if node is not None and not node.items and parent is not None:
            text = jsonc.remove_member(text, parent, self.keys[-1])  # a list we emptied goes too
        return text.encode("utf-8")

    def check(self, current: bytes | None) -> Check:
        if current is None:
            return Check("missing", f"{self.path} does not exist")
        node = self._list(self._load(current))
        values = node.value() if node is not None else []
        if self.uri in values:
            return Check("ok", f"{self.uri} listed in {'.'.join(self.keys)}")
        if any(_is_our_plugin_spec(v) for v in values):
            return Check("outdated", "an older agent-collector plugin path is listed")
        return Check("missing", f"{self.uri} is not listed in {'.'.join(self.keys)}")


def _is_our_plugin_spec(value: Any) -> bool:
    return isinstance(value, str) and re.search(r"agent-collector", value) is not None


def plugin_inject_edits(agent: str, spec: dict[str, Any], paths: Paths) -> list[FileEdit]:
    if spec["format"] == "toml":
        raise NotImplementedKind("plugin_inject into a TOML file is not supported yet")
    copy = paths.data_dir / "integrations" / agent / Path(spec["asset"]).name
    return [
        ManagedFile(agent, spec, copy, lambda: render_asset(spec["asset"], agent, paths)),
        PluginListJson(agent, spec, paths, copy.absolute().as_uri()),
    ]
