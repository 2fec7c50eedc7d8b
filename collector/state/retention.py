"""Housekeeping: what we keep is kept only as long as the settings say (``[retention]``).

* The spool is transit: a spool file whose every line is committed downstream (its checkpoint offset is
  its size) and which was not written for ``spool_grace_s`` is deleted when it belongs to a past UTC day
  (hook script and daemon files alike; nobody appends to them any more), and the daemon's own file of
  today is emptied (under the spool writer's lock, so no line slips in between). The hook script's file
  of today (appended without a lock we could share) is renamed aside to ``<name>.swept``, a name the
  spool glob ``*.jsonl`` does not match; the rename keeps the inode, so a hook that opened the file just
  before appends into the renamed one. A later sweep settles a ``.swept`` file quiet for the grace:
  lines past its committed offset (such a late append) are put back under the old name with a hard link
  when that name is free (the tailer goes on at its offset), or are read by the tailer's rotation when a
  new day file took the name; a ``.swept`` file with nothing unread is deleted. The next hook creates a
  fresh day file.
* Output: daily ``activity-YYYY-MM-DD.jsonl`` files older than ``output_days`` are deleted, then the
  oldest while all together exceed ``output_max_mb`` (today's file is never deleted).
* Quarantine files not written for ``quarantine_days`` are deleted.
* Logs (``<data dir>/log/*.log``): a log over ``log_max_mb`` moves to ``<log>.1``; rotated logs older than
  ``log_days`` are deleted.

Every function returns what it removed; 0 in a setting means "no limit of that kind".
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

DAY_S = 86400.0
MB = 1024 * 1024


class Emptier(Protocol):
    def empty_if_committed(self, path: Path, ino: int, committed: int) -> bool: ...


@dataclass(slots=True)
class SpoolSweep:
    deleted: list[Path] = field(default_factory=list)
    emptied: list[Path] = field(default_factory=list)
    swept: list[Path] = field(default_factory=list)  # the hook script's files of today, renamed aside
    forget: list[str] = field(default_factory=list)  # checkpoint streams of deleted files


def _day_of(name: str) -> str | None:
    """``claude-code-2026-11-30.jsonl`` / ``...-2026-11-30.http.jsonl`` -> ``2026-11-30``."""
    stem = name.removesuffix(".jsonl").removesuffix(".http")
    day = stem[-10:]
    return day if len(day) == 10 and day[4] == "-" and day[7] == "-" and day.replace("-", "").isdigit() else None


SWEPT = ".swept"  # suffix of a hook-script spool file renamed aside (the spool glob is ``*.jsonl``)
Streams = dict[str, tuple[str, Mapping[str, Any]]]  # spool file path -> (checkpoint stream, position)


def sweep_spool(positions: Mapping[str, Mapping[str, Any]], spool_dir: Path, writer: Emptier | None,
                grace_s: float, now: float | None = None) -> SpoolSweep:
    """Delete, empty or rename aside the spool files whose every line is committed (``positions``: the
    committed checkpoint positions, stream -> value). Renamed files are settled first, so a file is never
    renamed and deleted in one sweep: a hook that opened it before the rename has the grace to write."""
    now = time.time() if now is None else now
    today = time.strftime("%Y-%m-%d", time.gmtime(now))
    streams = _spool_streams(positions, spool_dir)
    sweep = SpoolSweep()
    for swept in sorted(spool_dir.glob(f"*/*.jsonl{SWEPT}")):
        _settle_swept(swept, streams, grace_s, now, sweep)
    for name, (stream, value) in streams.items():
        path = Path(name)
        day = _day_of(path.name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        committed = int(value.get("offset", -1))
        idle = now - st.st_mtime >= grace_s
        if day is None or st.st_ino != value.get("ino") or st.st_size != committed or not idle:
            continue
        if day < today:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            sweep.deleted.append(path)
            sweep.forget.append(stream)
        elif path.name.endswith(".http.jsonl"):
            if writer is not None and writer.empty_if_committed(path, st.st_ino, committed):
                sweep.emptied.append(path)
        elif stat.S_ISREG(st.st_mode) and _rename_aside(path, now):
            sweep.swept.append(path)
    return sweep


def _spool_streams(positions: Mapping[str, Mapping[str, Any]], spool_dir: Path) -> Streams:
    """The streams of files in the spool: named under the spool folder (as the spool sources spell it, or
    resolved) and resolving into it. Only those are resolved: a daemon with 20,000 transcripts resolved
    every one of them (an lstat per path component) at every sweep."""
    root = os.path.realpath(spool_dir) + os.sep
    spelled = (os.path.abspath(spool_dir) + os.sep, root)
    streams: Streams = {}
    for stream, value in positions.items():
        name = stream[stream.find(":/") + 1:]  # "<source name>:<absolute path>"; source names hold ":"
        if name.startswith(spelled) and os.path.realpath(name).startswith(root):
            streams[name] = (stream, value)
    return streams


def _rename_aside(path: Path, now: float) -> bool:
    """``x.jsonl`` -> ``x.jsonl.swept`` (unless one is still there), its time set to now: the grace of a
    hook that opened ``x.jsonl`` just before runs from here."""
    swept = path.with_name(path.name + SWEPT)
    if os.path.lexists(swept):
        return False
    try:
        os.rename(path, swept)
        os.utime(swept, (now, now))
    except FileNotFoundError:
        return False
    return True


def _settle_swept(swept: Path, streams: Streams, grace_s: float, now: float, sweep: SpoolSweep) -> None:
    try:
        st = os.lstat(swept)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode) or now - st.st_mtime < grace_s:
        return
    origin = swept.with_name(swept.name.removesuffix(SWEPT))
    stream, value = streams.get(str(origin), ("", {}))
    followed = value.get("ino") == st.st_ino and value.get("dev", st.st_dev) == st.st_dev
    if followed and st.st_size != int(value.get("offset", -1)):
        _put_back(swept, origin)  # a late append: the tailer reads it at the old name, from its offset
        return
    if followed and os.path.lexists(origin):
        if _same_file(origin, st):
            swept.unlink()  # put back earlier; only the second name went on
        return  # else a new day file took the name: the tailer finishes this one (rotation) before it
    with contextlib.suppress(FileNotFoundError):
        swept.unlink()
    sweep.deleted.append(swept)
    if followed:
        sweep.forget.append(stream)


def _same_file(path: Path, st: os.stat_result) -> bool:
    try:
        other = os.lstat(path)
    except OSError:
        return False
    return (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino)


def _put_back(swept: Path, origin: Path) -> None:
    """Hard link, never rename: a day file a new hook created meanwhile is not replaced."""
    try:
        os.link(swept, origin)
    except FileExistsError:
        return  # the tailer reads this file's rest when it sees the new inode at the name
    except OSError as exc:
        log.warning("%s: cannot put back its unread lines (%s); kept", swept, exc)
        return
    swept.unlink()


def _output_day(path: Path) -> str | None:
    name = path.name
    if not (name.startswith("activity-") and name.endswith(".jsonl")):
        return None
    return _day_of(name)


def prune_outputs(directory: Path, days: int, max_mb: int, now: float | None = None) -> list[Path]:
    now = time.time() if now is None else now
    today = time.strftime("%Y-%m-%d", time.gmtime(now))
    oldest_kept = time.strftime("%Y-%m-%d", time.gmtime(now - days * DAY_S))
    files = sorted((p for p in directory.glob("activity-*.jsonl") if _output_day(p) and not p.is_symlink()),
                   key=lambda p: p.name)
    removed = [p for p in files if days and str(_output_day(p)) < oldest_kept and _output_day(p) != today]
    kept = [p for p in files if p not in removed]
    if max_mb:
        sizes = {p: p.stat().st_size for p in kept}
        total = sum(sizes.values())
        for path in kept:
            if total <= max_mb * MB or _output_day(path) == today:
                break
            removed.append(path)
            total -= sizes[path]
    for path in removed:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return removed


def prune_idle_files(files: Iterable[Path], days: int, now: float | None = None) -> list[Path]:
    """Delete the regular files not written for ``days`` days."""
    if not days:
        return []
    now = time.time() if now is None else now
    removed = []
    for path in files:
        with contextlib.suppress(OSError):
            if path.is_file() and not path.is_symlink() and now - path.stat().st_mtime >= days * DAY_S:
                path.unlink()
                removed.append(path)
    return removed


def cap_logs(log_dir: Path, max_mb: int, days: int, now: float | None = None) -> list[Path]:
    """A log over ``max_mb`` is copied to ``<log>.1`` and emptied (its writer appends, so it goes on at
    the new end); rotated logs older than ``days`` are deleted. Returns the logs rotated or deleted."""
    changed: list[Path] = []
    if max_mb:
        for path in sorted(log_dir.glob("*.log")):
            with contextlib.suppress(OSError):
                if not path.is_symlink() and path.stat().st_size > max_mb * MB:
                    rotated = path.with_name(path.name + ".1")
                    with contextlib.suppress(FileNotFoundError):
                        rotated.unlink()  # never copy through a link planted there
                    shutil.copyfile(path, rotated, follow_symlinks=False)
                    os.chmod(rotated, 0o600)
                    os.truncate(path, 0)
                    changed.append(path)
    changed += prune_idle_files(sorted(log_dir.glob("*.log.*")), days, now)
    return changed
