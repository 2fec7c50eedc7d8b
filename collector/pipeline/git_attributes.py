"""The git attributes of an entry, as its working tree is at the moment the entry is emitted.

An entry with ``workspace.root`` (``collector.pipeline.workspace``) inside a git working tree gets:

| field | name from | what |
|---|---|---|
| ``vcs.repository.url.full`` | OpenTelemetry VCS registry | the remote's URL, normalised (``collector.util.git_url``) |
| ``vcs.repository.name`` | OpenTelemetry VCS registry | the URL's last part (``app``) |
| ``vcs.ref.head.name`` | OpenTelemetry VCS registry | the checked-out branch (absent on a detached HEAD) |
| ``vcs.ref.head.revision`` | OpenTelemetry VCS registry | the commit HEAD is at (absent before the first commit) |
| ``vcs.ref.type`` | OpenTelemetry VCS registry | ``branch`` when a branch is checked out |
| ``git.worktree.path`` | ours | the working tree's top directory (a linked worktree's own) |
| ``git.worktree.linked`` | ours | true for a worktree made by ``git worktree add`` |

Registry: https://opentelemetry.io/docs/specs/semconv/registry/attributes/vcs/ . The facts are read from
the files (``collector.pipeline.git_reader``), cached per root; a cached answer older than ``recheck_s``
is checked by the modification times of HEAD, the branch's ref, packed-refs and config, and read again
when one moved, so a ``git switch`` shows within ``recheck_s`` (1 s) plus one stat per file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collector.pipeline.git_reader import Repository, find_dirs, head_files, read_repository
from collector.util.git_url import repository_name

MAX_CACHED = 1024
RECHECK_S = 1.0
FIELDS = ("vcs.repository.url.full", "vcs.repository.name", "vcs.ref.head.name", "vcs.ref.head.revision",
          "vcs.ref.type", "git.worktree.path", "git.worktree.linked")


@dataclass(slots=True)
class _Cached:
    attributes: dict[str, Any]
    stamp: tuple[int, ...]
    files: tuple[str, ...]
    checked: float


class GitAttributes:
    """Stamps the git attributes on entries (``apply``); one cache per pipeline, no global state."""

    def __init__(self, recheck_s: float = RECHECK_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.recheck_s = recheck_s
        self._clock = clock
        self._cache: dict[str, _Cached] = {}
        self.reads = 0  # how many times a repository's files were read (tests see the cache work)

    def apply(self, entry: dict[str, Any]) -> None:
        root = entry.get("workspace.root")
        if isinstance(root, str) and root and os.path.isabs(root):
            for key, value in self.attributes(root).items():  # what the agent said itself stays
                entry.setdefault(key, value)

    def attributes(self, root: str) -> dict[str, Any]:
        now = self._clock()
        cached = self._cache.get(root)
        if cached is not None and now - cached.checked < self.recheck_s:
            return cached.attributes
        if cached is not None and _stamp(cached.files) == cached.stamp:
            cached.checked = now
            return cached.attributes
        fresh = self._read(root, now)
        if len(self._cache) >= MAX_CACHED and root not in self._cache:
            self._cache.clear()
        self._cache[root] = fresh
        return fresh.attributes

    def _read(self, root: str, now: float) -> _Cached:
        self.reads += 1
        dirs = find_dirs(root)
        if dirs is None:
            files: tuple[str, ...] = (os.path.join(root, ".git"),)
            return _Cached({}, _stamp(files), files, now)
        files = head_files(dirs, None)
        stamp = _stamp(files)  # before reading: a change while reading is seen at the next check
        repository = read_repository(root)
        if repository is not None and repository.branch is not None:
            ref = head_files(dirs, repository.branch)[len(files):]
            files, stamp = files + ref, stamp + _stamp(ref)
        return _Cached(as_attributes(repository), stamp, files, now)


def as_attributes(repository: Repository | None) -> dict[str, Any]:
    if repository is None:
        return {}
    out: dict[str, Any] = {}
    if repository.remote_url:
        out["vcs.repository.url.full"] = repository.remote_url
        name = repository_name(repository.remote_url)
        if name:
            out["vcs.repository.name"] = name
    if repository.branch:
        out["vcs.ref.head.name"] = repository.branch
        out["vcs.ref.type"] = "branch"
    if repository.revision:
        out["vcs.ref.head.revision"] = repository.revision
    out["git.worktree.path"] = repository.worktree
    out["git.worktree.linked"] = repository.linked
    return out


def _stamp(files: tuple[str, ...]) -> tuple[int, ...]:
    out: list[int] = []
    for path in files:
        try:
            st = os.stat(path)
        except OSError:
            out.extend((-1, -1, -1))
            continue
        out.extend((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(out)
