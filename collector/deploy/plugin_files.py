"""The ``dropin_plugin`` and ``plugin_inject`` integrations: a plugin file of ours the agent loads.

A drop-in is a whole file, rendered from an asset in ``integrations/``, that we put in a folder the agent
scans (:class:`ManagedFile`, ours by its marker); an injected plugin is a copy of the asset in our data
folder, listed by its ``file://`` URI in a list of the agent's JSON/JSONC config (:class:`PluginListJson`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collector.deploy.file_edit import Check, FileEdit, file_text
from collector.deploy.hookcmd import ASSET_MARKER
from collector.deploy.json_edit import parse_json, set_dotted
from collector.deploy.jsonc import Node, append_item, find, remove_item, remove_member
from collector.deploy.model import Conflict, DeployError, NotImplementedKind
from collector.paths import Paths, project_root


def render_asset(asset: str, agent: str, paths: Paths) -> bytes:
    """The asset ``integrations/<asset>`` with our spool folder and agent id filled in; it must carry our marker."""
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
        return "{}\n" if current is None or not current.strip() else file_text(current, self.path)

    def _list(self, text: str) -> Node | None:
        root = parse_json(text, self.path, self.comments)
        node = find(root, self.keys)
        if node is not None and node.kind != "array":
            raise DeployError(f"{self.path}: {'.'.join(self.keys)} is not a list; left untouched")
        return node

    def apply(self, current: bytes | None) -> bytes | None:
        text = self._load(current)
        node = self._list(text)
        if node is None:
            text = set_dotted(text, self.path, self.comments, self.keys, [self.uri])
        elif self.uri not in node.value():
            text = append_item(text, node, self.uri)
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
            text, changed = remove_item(text, node, ours[-1]), True
        if not changed:
            return current
        node = self._list(text)
        parent = find(parse_json(text, self.path, self.comments), self.keys[:-1])
        if node is not None and not node.items and parent is not None:
            text = remove_member(text, parent, self.keys[-1])  # a list we emptied goes too
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
