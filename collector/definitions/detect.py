"""Detect which agents are installed: any listed path holds something, or any listed command is on PATH.

An empty folder does not count: tools (and tests) leave empty ``~/.config/<agent>`` folders behind, and
deploying an integration into a home without the agent would be wrong."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from collector.definitions.loader import AgentDefinition
from collector.paths import Paths


@dataclass(frozen=True, slots=True)
class Detection:
    agent: str
    installed: bool
    found_paths: tuple[str, ...]
    found_commands: tuple[str, ...]


def detect(defn: AgentDefinition, paths: Paths, env: Mapping[str, str] | None = None) -> Detection:
    spec = defn.raw.get("detect", {})
    found_paths = tuple(  # env None: the Paths decide (an isolated --home ignores the caller's variables)
        str(p) for p in (paths.expand(t, env) for t in spec.get("paths", [])) if _holds_something(p)
    )
    search = (os.environ if env is None else env).get("PATH", os.defpath)
    found_cmds = tuple(
        str(w) for w in (shutil.which(c, path=search) for c in spec.get("commands", [])) if w
    )
    return Detection(defn.id, bool(found_paths or found_cmds), found_paths, found_cmds)


def _holds_something(path: Path) -> bool:
    """A file, or a folder with at least one entry (an empty folder is no sign of the agent)."""
    try:
        if path.is_dir():
            return next(path.iterdir(), None) is not None
        return path.exists()
    except OSError:
        return False
