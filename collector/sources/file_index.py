"""The files a source's globs match, kept up to date cheaply: a folder is listed again only when its
identity, mode or mtime moved (an entry added, removed or renamed changes the folder's mtime; an append
to a file does not), so finding the files among 20,000 unchanged ones costs a ``stat`` per folder, not
a listing. A folder whose mtime is within ``RACY_NS`` of when it was listed is listed again (a file
created in the same clock tick as the listing would not move a coarse mtime).

The matching is ``glob.glob``'s (``*`` never crosses a ``/``, ``**`` is ``*``, names starting with a dot
need a pattern segment starting with a dot, folders are followed through symlinks); a folder that
exists but cannot be listed is reported in ``unreadable``.
"""

from __future__ import annotations

import fnmatch
import glob
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from collector.sources.base import Scope

RACY_NS = 2_000_000_000  # a listing this close to the folder's mtime is not trusted (coarse mtimes)
Stamp = tuple[int, int, int, int]  # st_dev, st_ino, st_mode, st_mtime_ns
_Walk = tuple[list[list[tuple[str, bool]]], set[str], set[str], set[tuple[str, str]]]


@dataclass(slots=True)
class _Listing:
    stamp: Stamp
    trusted: bool  # False: listed too close to its mtime, list again next time
    matches: list[tuple[str, bool]]  # (path, is a folder) of the entries matching the segment
    readable: bool = True


class GlobIndex:
    """``files()``: every path the globs match now. ``version`` moves whenever that set may have changed."""

    def __init__(self, globs: Iterable[str]) -> None:
        self._globs = [g.split(os.sep) for g in globs]
        self._patterns = [_segments(g) for g in globs]
        self._listings: dict[tuple[str, str], _Listing] = {}
        self._files: set[str] = set()
        self._singles: set[str] = set()
        self._relisted = False  # a folder was listed again during this files()
        self.racy = False  # a listing of the last files() is not trusted yet (listed again next time)
        self.unreadable: set[str] = set()  # folders the globs reach that cannot be listed
        self.version = 0

    def files(self) -> set[str]:
        leaves: list[list[tuple[str, bool]]] = []  # the listings whose entries are files
        singles: set[str] = set()  # paths the globs name without a wildcard, if they exist
        unreadable: set[str] = set()
        seen: set[tuple[str, str]] = set()
        self._relisted = self.racy = False
        for base, parts in self._patterns:
            self._walk(base, parts, (leaves, singles, unreadable, seen))
        gone = [k for k in self._listings if k not in seen]  # folders gone or no longer reached
        for key in gone:
            del self._listings[key]
        if self._relisted or gone or singles != self._singles or self.version == 0:
            found = set(singles)
            for leaf in leaves:
                found.update(path for path, _ in leaf)
            if found != self._files or self.version == 0:
                self._files, self.version = found, self.version + 1
            self._singles = singles
        self.unreadable = unreadable
        return self._files

    def matches(self, path: str) -> bool:
        """``path`` is one ``files()`` would list if it existed (the same rules, without a listing)."""
        parts = path.split(os.sep)
        return any(len(parts) == len(wanted) and all(map(_segment_matches, parts, wanted)) for wanted in self._globs)

    def _walk(self, folder: str, parts: tuple[str, ...], into: _Walk) -> None:
        leaves, singles, unreadable, seen = into
        head, rest = parts[0], parts[1:]
        if not glob.has_magic(head):
            path = os.path.join(folder, head)
            if rest:
                self._walk(path, rest, into)
            elif os.path.lexists(path):
                singles.add(path)
            return
        seen.add((folder, head))
        matches = self._matches(folder, head, unreadable)
        if not rest:
            leaves.append(matches)
            return
        for path, is_dir in matches:
            if is_dir:
                self._walk(path, rest, into)

    def _matches(self, folder: str, segment: str, unreadable: set[str]) -> list[tuple[str, bool]]:
        """The entries of ``folder`` matching ``segment``, listed again only when the folder changed."""
        try:
            st = os.stat(folder)
        except OSError:
            self._listings.pop((folder, segment), None)
            return []
        stamp = (st.st_dev, st.st_ino, st.st_mode, st.st_mtime_ns)
        known = self._listings.get((folder, segment))
        if known is None or not known.trusted or known.stamp != stamp:
            listed_ns = time.time_ns()
            matches = _list(folder, segment)
            known = _Listing(stamp, listed_ns - st.st_mtime_ns >= RACY_NS, matches or [], matches is not None)
            self._listings[(folder, segment)] = known
            self._relisted = True
        self.racy = self.racy or not known.trusted
        if not known.readable:
            unreadable.add(folder)
        return known.matches


class ScopedFiles:
    """Which files a file source reads under a ``Scope``: the ones events named, the new ones a listing
    finds, and a slice of the rest in turns, so that every known file is checked once in ``1 / sweep``
    sweeps. The folders are stat-ed (and those that moved listed) once in those ``1 / sweep`` sweeps too,
    at once when an event names a path under them that is not one of our files, and at the next sweep
    while a listing is too close to its folder's mtime to be trusted: a new file whose event was lost
    waits at most as long as an append whose event was lost (``collector.rescan_s``)."""

    def __init__(self, globs: Iterable[str], watched: Iterable[str]) -> None:
        self.index = GlobIndex(globs)
        self._under = tuple(d.rstrip(os.sep) + os.sep for d in watched)
        self._at = 0  # where the next slice starts in the sorted list of files
        self._listed: list[str] | None = None  # files() at the last pick: new files are looked for when it moved
        self._sorted: tuple[tuple[int, int], list[str]] = ((-1, -1), [])  # sorted_files() as last sorted
        self._sweeps = 0  # sweeps since the folders were last looked at

    def sorted_files(self, extra: set[str] | None = None, keep: Callable[[str], bool] | None = None) -> list[str]:
        """The globs' files (folders listed again only when they changed) and ``extra``, those ``keep``
        accepts, sorted: the same list object while neither the listing nor ``extra`` moved."""
        found = self.index.files()
        extra = extra or set()
        key = (self.index.version, len(extra))
        if key != self._sorted[0]:
            self._sorted = (key, sorted(p for p in found | extra if keep is None or keep(p)))
        return self._sorted[1]

    def pick(self, scope: Scope, files: Callable[[], list[str]], wants: Callable[[str], bool],
             new: Callable[[str], bool]) -> list[str]:
        """``files()``: every file (its listing refreshed; the same list object while nothing changed);
        ``wants``: a path named by an event is one of ours; ``new``: a file not read to its end yet
        (looked for when the list changed; one still unfinished then is met again by the slices)."""
        picked = {p for p in scope.changed if wants(p)}
        # a folder or a name that is not one of our files moved under our folders: list again
        moved = any(p not in picked and p.startswith(self._under) for p in scope.changed)
        if moved or self._folders_due(scope.sweep):
            every = files()
            self._sweeps = 0
            if every is not self._listed:
                picked.update(p for p in every if new(p))
                self._listed = every
        if scope.sweep > 0:
            picked.update(self._slice(self._listed if self._listed is not None else files(), scope.sweep))
        return sorted(picked)

    def _folders_due(self, sweep: float) -> bool:
        """This sweep looks at the folders: the first, one in ``1 / sweep``, or a listing is not trusted."""
        if sweep <= 0:
            return False
        self._sweeps += 1
        return self._listed is None or self.index.racy or self._sweeps >= 1 / sweep

    def _slice(self, files: list[str], share: float) -> list[str]:
        if not files:
            return []
        count = min(len(files), max(1, math.ceil(len(files) * share)))
        start = self._at % len(files)
        part = files[start:start + count]
        if len(part) < count:
            part += files[:count - len(part)]
        self._at = (start + count) % len(files)
        return part


def _segment_matches(name: str, segment: str) -> bool:
    if not glob.has_magic(segment):
        return name == segment
    return (segment.startswith(".") or not name.startswith(".")) and fnmatch.fnmatchcase(name, segment)


def _list(folder: str, segment: str) -> list[tuple[str, bool]] | None:
    """None: the folder exists but cannot be listed."""
    hidden = segment.startswith(".")
    if not os.access(folder, os.R_OK | os.X_OK):
        return None
    try:
        with os.scandir(folder) as entries:
            out = []
            for entry in entries:
                if (hidden or not entry.name.startswith(".")) and fnmatch.fnmatchcase(entry.name, segment):
                    out.append((os.path.join(folder, entry.name), _is_dir(entry)))
            return out
    except (PermissionError, NotADirectoryError) as exc:
        return None if isinstance(exc, PermissionError) else []
    except OSError:
        return []


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _segments(pattern: str) -> tuple[str, tuple[str, ...]]:
    """(the folder before the first segment with a wildcard, the segments from there on)."""
    parts = pattern.split(os.sep)
    first = next((i for i, p in enumerate(parts) if glob.has_magic(p)), len(parts) - 1)
    base = os.sep.join(parts[:first]) or (os.sep if pattern.startswith(os.sep) else os.curdir)
    return base, tuple(parts[first:])
