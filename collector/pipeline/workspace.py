"""The project of an entry: the repository root of the working directory the agent recorded.

An entry with ``workspace.path`` (a transcript's ``cwd``, a session header, a hook payload's ``cwd``)
gets ``workspace.root``: the nearest directory at or above it that holds ``.git`` (a directory, or the
file of a worktree or submodule), found by walking up at most ``MAX_LEVELS`` levels; a path inside no
repository, or one that is gone (a deleted temporary directory), is its own root. Answers are cached per
path (bounded), so a session's thousand entries cost one walk.
"""

from __future__ import annotations

import os
from typing import Any

MAX_LEVELS = 32
MAX_CACHED = 4096


class WorkspaceRoots:
    def __init__(self) -> None:
        self._roots: dict[str, str] = {}

    def apply(self, entry: dict[str, Any]) -> None:
        path = entry.get("workspace.path")
        if isinstance(path, str) and path and "workspace.root" not in entry:
            entry["workspace.root"] = self.root(path)

    def root(self, path: str) -> str:
        found = self._roots.get(path)
        if found is None:
            if len(self._roots) >= MAX_CACHED:
                self._roots.clear()
            found = self._roots[path] = repository_root(path)
        return found


def repository_root(path: str) -> str:
    """``path``'s repository root, or ``path`` itself (normalised) when it is in none."""
    start = os.path.normpath(path)
    if not os.path.isabs(start):
        return start
    here = start
    for _ in range(MAX_LEVELS):
        if os.path.lexists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    return start
