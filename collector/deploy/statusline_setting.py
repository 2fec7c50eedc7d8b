"""``agent-collector statusline install|uninstall``: the agent's status-line setting (its definition's
``statusline``: the settings file and key, e.g. Claude Code's ``statusLine`` in ``settings.json``) set to
our command, reversibly. What was there is saved in ``<state dir>/statusline.json`` (per agent: the
previous value, the file's bytes before and after our edit); our command runs a previous command first
(``collector.cli.statusline_cmd.chained``). ``uninstall`` restores the file's bytes when nobody edited it
since, else puts the previous value back in place of ours; a value someone else set since is left alone."""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import collector
from collector.definitions import load_definitions
from collector.deploy.fsutil import read_or_none, write_atomic
from collector.deploy.json_edit import parse_json, set_dotted
from collector.deploy.model import DeployError
from collector.paths import Paths
from collector.util.atomic import atomic_write

MODULE = "collector.cli.statusline"  # in every command we write (and in older ones): how we recognise ours
# the command: no site start-up, this package's folder first on the path (collector.cli.statusline_show)
BOOT = ("import sys; sys.path.insert(0, sys.argv.pop(1)); from collector.cli.statusline_show import main; "
        "sys.exit(main())")
SAVED = "statusline.json"


def our_setting(paths: Paths, agent: str, spec: dict[str, Any]) -> dict[str, Any]:
    root = str(Path(collector.__file__).resolve().parent.parent)
    command = shlex.join([sys.executable, "-S", "-c", BOOT, root, "--state-dir", str(paths.state_dir),
                          "--agent", agent])
    return {"type": "command", "command": command, "padding": 0, "refreshInterval": spec.get("refresh_interval", 5)}


def is_ours(value: Any) -> bool:
    return isinstance(value, dict) and MODULE in str(value.get("command", ""))


def _spec(paths: Paths, agent: str) -> dict[str, Any]:
    definition = load_definitions(paths.agents_override_dir).agents.get(agent)
    spec = definition.raw.get("statusline") if definition else None
    if not isinstance(spec, dict):
        raise ValueError(f"{agent}: no status-line setting is known for this agent")
    return spec


def _current(path: Path, key: str) -> tuple[str, Any]:
    data = read_or_none(path)
    text = "{}\n" if data is None else data.decode("utf-8")
    try:
        root = parse_json(text, path, comments=False)
    except DeployError as exc:
        raise ValueError(str(exc)) from None
    if root.kind != "object":
        raise ValueError(f"{path}: not a JSON object; left untouched")
    member = root.member(key)
    return text, None if member is None else member.value.value()


def _saved(paths: Paths) -> dict[str, Any]:
    data = read_or_none(paths.state_dir / SAVED)
    try:
        saved = json.loads(data) if data else {}
    except ValueError:
        saved = {}
    return saved if isinstance(saved, dict) else {}


def installed(paths: Paths) -> set[str]:
    """The agents whose status line ``install`` set (and ``uninstall`` has not undone)."""
    return set(_saved(paths))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def change(paths: Paths, agent: str, install: bool, dry_run: bool = False) -> list[str]:
    """Install or uninstall; returns what it did (or, with ``dry_run``, would do), one line each."""
    spec = _spec(paths, agent)
    path, key = paths.expand(spec["file"]), str(spec.get("key", "statusLine"))
    text, value = _current(path, key)
    saved = _saved(paths)
    mine = saved.get(agent) if isinstance(saved.get(agent), dict) else None
    if install:
        ours = our_setting(paths, agent, spec)
        if value == ours:
            return [f"{path}: {key} already runs agent-collector statusline"]
        previous = mine["previous"] if mine and is_ours(value) else value
        new_text = set_dotted(text, path, False, [key], ours)
        if dry_run:
            return [f"would set {key} in {path}" + (" (keeping the one there, shown first)" if previous else "")]
        saved[agent] = {"file": str(path), "key": key, "previous": previous,
                        "before": text if read_or_none(path) is not None else None, "after": _digest(new_text)}
        atomic_write(paths.state_dir / SAVED, json.dumps(saved, indent=2).encode())
        write_atomic(path, new_text.encode())
        return [f"set {key} in {path}" + (f"; the previous one runs first: {previous.get('command')}"
                                          if isinstance(previous, dict) else "")]
    if not is_ours(value):
        return [f"{path}: {key} is not ours; left alone"]
    previous = mine.get("previous") if mine else None
    if mine and _digest(text) == mine.get("after"):
        restored = mine.get("before")
    elif previous is not None:
        restored = set_dotted(text, path, False, [key], previous)
    else:
        data = json.loads(text)
        data.pop(key, None)
        restored = json.dumps(data, indent=2) + "\n"
    if dry_run:
        return [f"would restore {key} in {path}"]
    if restored is None:
        path.unlink()
    else:
        write_atomic(path, restored.encode())
    saved.pop(agent, None)
    atomic_write(paths.state_dir / SAVED, json.dumps(saved, indent=2).encode())
    return [f"restored {key} in {path}" if previous is not None else f"removed {key} from {path}"]
