"""LoongSuite Pilot's hooks (and injected plugin specs) out of an agent's config file, and back byte for byte.

Pilot's hook commands and plugin specs all name its data folder (``$PILOT_DATA/hooks/<agent>-loongsuite-pilot-hook.sh``,
expanded to ``~/.loongsuite-pilot/...``; its uninstaller removes the entries carrying that marker,
github.com/alibaba/loongsuite-pilot ``docs/installation.md``). Only the files of agents we hook ourselves
(our ``settings_hooks`` and ``flat_hooks`` files, and the config files where Pilot injects its plugin
for an agent we load a plug-in into) are touched, so the two collectors do not both run.
Before a file changes its exact bytes are saved under ``<state dir>/pilot-hooks/``; ``restore`` writes them
back when the file is still as removal left it (a file changed since is named and left alone).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from collector.definitions.pilot_convert import pilot_facts
from collector.deploy.fsutil import read_or_none, write_atomic
from collector.deploy.jsonc import JsoncError, Node, find, parse, remove_item, remove_member
from collector.paths import Paths

MARKERS = (".loongsuite-pilot", "loongsuite-pilot-hook")
HOOK_KINDS = ("settings_hooks", "flat_hooks")
COMMAND_KEYS = ("command", "bash", "powershell")
MANIFEST = "manifest.json"
MAX_FILE = 8 << 20


@dataclass(frozen=True, slots=True)
class Target:
    agent: str
    path: Path
    format: str  # json | jsonc | toml


PLUGIN_KEYS = ("plugin", "plugins", "extensions")  # top-level lists of plugin specs (pluginInject.configKey)


def _format(path: str) -> str:
    return "toml" if path.endswith(".toml") else "jsonc" if path.endswith(".jsonc") else "json"


def targets(definitions: Iterable[Any], paths: Paths, extra: Mapping[str, Iterable[str]] | None = None) -> list[Target]:
    """The files of the agents we integrate ourselves (``AgentDefinition``s) where Pilot's hooks or plugin
    specs live: our hook files, Pilot's plugin files for our plug-in agents (``plugin_files`` of
    ``collector/data/loongsuite-pilot.json``), and ``extra`` (agent id -> path templates, from Pilot's
    definitions of those agents found in its home)."""
    out: dict[Path, Target] = {}
    for definition in definitions:
        for spec in definition.raw.get("integrations", []):  # every variant: each hooks the agent
            if isinstance(spec, dict) and spec.get("kind") in HOOK_KINDS and isinstance(spec.get("file"), str):
                path = paths.expand(spec["file"])
                out.setdefault(path, Target(definition.id, path, str(spec.get("format", "json"))))
        more = [*pilot_facts()["plugin_files"]["files"].get(definition.id, ()), *((extra or {}).get(definition.id, ()))]
        for template in more:
            if definition.raw.get("integrations"):
                path = paths.expand(template)
                out.setdefault(path, Target(definition.id, path, _format(template)))
    return list(out.values())


def _pilots(value: Any) -> bool:
    return isinstance(value, dict) and any(isinstance(value.get(k), str) and any(m in value[k] for m in MARKERS)
                                           for k in COMMAND_KEYS)


def _one_removal(text: str, hooks: Node) -> str | None:
    """The text with one Pilot hook (or the group or event it empties) removed, or None if none is left."""
    for member in hooks.members:
        events = member.value
        if events.kind != "array":
            continue
        for index, item in enumerate(events.items):
            value = item.value()
            inner = find(item, ["hooks"]) if item.kind == "object" else None
            if _pilots(value):
                if len(events.items) == 1:
                    return remove_member(text, hooks, member.key)
                return remove_item(text, events, index)
            if inner is not None and inner.kind == "array":
                for n, hook in enumerate(inner.items):
                    if _pilots(hook.value()):
                        if len(inner.items) > 1:
                            return remove_item(text, inner, n)
                        return remove_member(text, hooks, member.key) if len(events.items) == 1 \
                            else remove_item(text, events, index)
    return None


def _one_spec_removal(text: str, root: Node) -> str | None:
    """The text with one of Pilot's plugin specs (a string naming its folder) out of a top-level list."""
    for key in PLUGIN_KEYS:
        specs = find(root, [key])
        if specs is not None and specs.kind == "array":
            for index, item in enumerate(specs.items):
                if item.kind == "string" and any(m in str(item.scalar) for m in MARKERS):
                    return remove_item(text, specs, index)
    return None


def without_pilot_json(text: str, comments: bool) -> tuple[str, int]:
    removed = 0
    while True:
        root = parse(text, comments=comments)
        hooks = find(root, ["hooks"])
        changed = _one_removal(text, hooks) if hooks is not None and hooks.kind == "object" else None
        if changed is None:
            changed = _one_spec_removal(text, root)
        if changed is None:
            return text, removed
        text, removed = changed, removed + 1


_TABLE = re.compile(r"^[ \t]*\[", re.MULTILINE)


def without_pilot_toml(text: str) -> tuple[str, int]:
    """``[[hooks]]`` tables (Kimi CLI's flat layout) whose command is Pilot's, cut out of the text."""
    starts = [m.start() for m in _TABLE.finditer(text)] + [len(text)]
    kept, removed = [text[: starts[0]]], 0
    for start, end in zip(starts, starts[1:], strict=False):
        block = text[start:end]
        if block.lstrip().startswith("[[hooks]]") and _pilots(tomllib.loads(block.split("\n", 1)[-1] or "")):
            removed += 1
            continue
        kept.append(block)
    new = "".join(kept)
    before, after = tomllib.loads(text), tomllib.loads(new)
    hooks = [h for h in before.get("hooks", []) if not _pilots(h)] if isinstance(before.get("hooks"), list) else None
    expected = {k: v for k, v in before.items() if k != "hooks"} | ({"hooks": hooks} if hooks else {})
    if after != expected:  # a line opening with "[" inside a value: the cut is not sure, so none is made
        raise ValueError("Pilot's [[hooks]] tables could not be cut out cleanly")
    return new, removed


def without_pilot(data: bytes, fmt: str) -> tuple[bytes, int]:
    """The file's bytes without Pilot's hooks, and how many went; ValueError if it cannot be read."""
    try:
        text = data.decode("utf-8")
        new, removed = without_pilot_toml(text) if fmt == "toml" else without_pilot_json(text, fmt == "jsonc")
        if fmt == "toml":
            tomllib.loads(new)
    except (UnicodeDecodeError, JsoncError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ValueError(f"not valid {fmt} ({exc})") from None
    return new.encode("utf-8"), removed


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _store(paths: Paths) -> Path:
    return paths.state_dir / "pilot-hooks"


def _manifest(paths: Paths) -> list[dict[str, str]]:
    data = read_or_none(_store(paths) / MANIFEST)
    try:
        value = orjson.loads(data) if data else []
    except orjson.JSONDecodeError:
        return []
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def remove(paths: Paths, found: Iterable[Target], dry_run: bool) -> list[str]:
    lines: list[str] = []
    manifest = {e.get("path"): e for e in _manifest(paths)}
    for target in found:
        data = read_or_none(target.path)
        if data is None or len(data) > MAX_FILE:
            continue
        try:
            new, removed = without_pilot(data, target.format)
        except ValueError as exc:
            lines.append(f"{target.agent}: {target.path}: {exc}; left untouched")
            continue
        if not removed:
            continue
        lines.append(f"{target.agent}: {'would remove' if dry_run else 'removed'} {removed} LoongSuite Pilot "
                     f"hook(s) from {target.path}")
        if dry_run:
            continue
        saved = _store(paths) / f"{_sha(str(target.path).encode())[:16]}.orig"
        write_atomic(saved, data, private=True)
        write_atomic(target.path, new)
        manifest[str(target.path)] = {"agent": target.agent, "path": str(target.path), "saved": saved.name,
                                      "original_sha256": _sha(data), "after_sha256": _sha(new)}
    if manifest and not dry_run:
        write_atomic(_store(paths) / MANIFEST, orjson.dumps(list(manifest.values()), option=orjson.OPT_INDENT_2),
                     private=True)
    return lines


def restore(paths: Paths, dry_run: bool) -> list[str]:
    lines: list[str] = []
    left = []
    for entry in _manifest(paths):
        path, saved = Path(str(entry.get("path"))), _store(paths) / Path(str(entry.get("saved"))).name
        original, current = read_or_none(saved), read_or_none(path)
        if original is None or _sha(original) != entry.get("original_sha256"):
            lines.append(f"{entry.get('agent')}: the saved copy of {path} is missing or changed; not restored")
            left.append(entry)
        elif current is not None and _sha(current) == entry.get("original_sha256"):
            lines.append(f"{entry.get('agent')}: {path} already holds Pilot's hooks")
        elif current is None or _sha(current) != entry.get("after_sha256"):
            lines.append(f"{entry.get('agent')}: {path} changed since Pilot's hooks were removed; not restored "
                         f"(its earlier bytes are in {saved})")
            left.append(entry)
        else:
            lines.append(f"{entry.get('agent')}: {'would restore' if dry_run else 'restored'} {path} byte for byte")
            if not dry_run:
                write_atomic(path, original)
                continue
            left.append(entry)
    if not dry_run and (_store(paths) / MANIFEST).exists():
        write_atomic(_store(paths) / MANIFEST, orjson.dumps(left, option=orjson.OPT_INDENT_2), private=True)
    return lines or ["no LoongSuite Pilot hooks to restore"]
