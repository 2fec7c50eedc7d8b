"""The ``settings_hooks`` integration: our command hooks in the agent's settings file.

In JSON or JSONC (:class:`SettingsHooksJson`) they are entries under ``hooks.<Event>`` edited in place, the
rest of the text kept byte for byte; in TOML (:class:`SettingsHooksToml`) they are ``[[hooks.<Event>]]``
tables in one marked block at the end of the file. Either way only our own entries are added, stripped
or reported on, and the user's hooks for the same events stay as they are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from collector.deploy.file_edit import Check, file_text
from collector.deploy.hookcmd import hook_command, is_our_command, is_our_hook
from collector.deploy.json_edit import parse_json, set_dotted
from collector.deploy.jsonc import Node, add_member, append_item, find, remove_item, remove_member
from collector.deploy.model import DeployError
from collector.deploy.tomltext import loads as load_toml
from collector.deploy.tomltext import toml_string, without_block
from collector.paths import Paths


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
        return file_text(current, self.path)

    def _root(self, text: str) -> Node:
        root = parse_json(text, self.path, self.comments)
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
            text = add_member(text, root, "hooks", {e: [self.desired_group(e)] for e in self.events})
        else:
            for event in self.events:
                hooks_node = find(self._root(text), ["hooks"])
                assert hooks_node is not None
                member = hooks_node.member(event)
                if member is None:
                    text = add_member(text, hooks_node, event, [self.desired_group(event)])
                elif member.value.kind != "array":
                    raise DeployError(f'{self.path}: "hooks.{event}" is not a list; left untouched')
                elif not self._event_in_place(member.value.value(), event):
                    text = append_item(text, member.value, self.desired_group(event))
        for dotted, value in self.settings.items():
            text = set_dotted(text, self.path, self.comments, dotted.split("."), value)
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
                groups = find(self._root(text), ["hooks", event])
                if groups is None or groups.kind != "array":
                    break
                edit = _strip_one(text, groups) if self.grouped else self._strip_listed(text, groups)
                if edit is None:
                    break
                text, removed_here = edit, True
            if removed_here:
                changed = True
                hooks_node = find(self._root(text), ["hooks"])
                groups = find(self._root(text), ["hooks", event])
                if hooks_node is not None and groups is not None and not groups.items:
                    text = remove_member(text, hooks_node, event)
        if not changed:
            return current
        root = self._root(text)
        hooks = root.member("hooks")
        if hooks is not None and not hooks.value.members:
            text = remove_member(text, root, "hooks")
        return text.encode("utf-8")

    def _strip_listed(self, text: str, hooks: Node) -> str | None:
        """Remove the last of our hooks from a list-layout ``hooks.<event>``; None when none is ours."""
        ours = [i for i, item in enumerate(hooks.items) if self.is_ours(item.value())]
        return remove_item(text, hooks, ours[-1]) if ours else None

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


def _strip_one(text: str, groups: Node) -> str | None:
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
            return remove_item(text, groups, gi)
        return remove_item(text, member.value, ours[-1])
    return None


BLOCK_START = "# >>> agent-collector hooks (managed: `agent-collector uninstall` removes this block) >>>"
BLOCK_END = "# <<< agent-collector hooks <<<"


class SettingsHooksToml(SettingsHooksJson):
    """The same hooks as ``[[hooks.<Event>]]`` tables in one marked block at the end of a TOML file."""

    def _load(self, current: bytes | None) -> str:
        return "" if current is None else file_text(current, self.path)

    def _block(self, newline: str) -> str:
        lines = [BLOCK_START]
        for event in self.events:
            group = self.desired_group(event)
            lines.append(f"[[hooks.{event}]]")
            if "matcher" in group:
                lines.append(f"matcher = {toml_string(group['matcher'])}")
            lines.append(f"[[hooks.{event}.hooks]]")
            for key, value in group["hooks"][0].items():
                rendered = toml_string(value) if isinstance(value, str) else json.dumps(value)
                lines.append(f"{key} = {rendered}")
        lines.append(BLOCK_END)
        return newline.join(lines) + newline

    def apply(self, current: bytes | None) -> bytes | None:
        text = self._load(current)
        load_toml(text, str(self.path))
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
        stripped = without_block(self._load(current), BLOCK_START, BLOCK_END)
        return current if stripped is None else stripped.encode("utf-8")

    def check(self, current: bytes | None) -> Check:
        if current is None:
            return Check("missing", f"{self.path} does not exist")
        data = load_toml(self._load(current), str(self.path))
        hooks = data.get("hooks")
        if not isinstance(hooks, dict):
            hooks = {}
        missing = [e for e in self.events if not self._event_in_place(hooks.get(e), e)]
        if not missing:
            return Check("ok", f"hooks for {len(self.events)} events in place")
        if len(missing) == len(self.events):
            return Check("missing", "none of our hooks are there")
        return Check("partial", "hooks missing for " + ", ".join(missing))
