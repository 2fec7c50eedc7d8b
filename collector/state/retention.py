"""Housekeeping: what we keep is kept only as long as the settings say (``[retention]``).

* The spool is transit: a spool file whose every line is committed downstream (its checkpoint offset is
  its size) and which was not written for ``spool_grace_s`` is deleted when it belongs to a past UTC day
  (hook script and daemon files alike; nobody appends to them any more), and the daemon's own file of
  today is emptied (under the spool writer's lock, so no line slips in between). The hook script's file
  of today stays until the day is over (it appends without a lock we could share).
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
    forget: list[str] = field(default_factory=list)  # checkpoint streams of deleted files


def _day_of(name: str) -> str | None:
    """``claude-code-2026-11-30.jsonl`` / ``...-2026-11-30.http.jsonl`` -> ``2026-11-30``."""
    stem = name.removesuffix(".jsonl").removesuffix(".http")
    day = stem[-10:]
    return day if len(day) == 10 and day[4] == "-" and day[7] == "-" and day.replace("-", "").isdigit() else None


def sweep_spool(positions: Mapping[str, Mapping[str, Any]], spool_dir: Path, writer: Emptier | None,
                grace_s: float, now: float | None = None) -> SpoolSweep:
    """Delete or empty the spool files whose every line is committed (``positions``: the committed
    checkpoint positions, stream -> value)."""
    now = time.time() if now is None else now
    today = time.strftime("%Y-%m-%d", time.gmtime(now))
    root = os.path.realpath(spool_dir) + os.sep
    sweep = SpoolSweep()
    for stream, value in positions.items():
        name = stream[stream.find(":/") + 1:]  # "<source name>:<absolute path>"; source names hold ":"
        path = Path(name)
        if not os.path.realpath(name).startswith(root):
            continue
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
        elif path.name.endswith(".http.jsonl") and writer is not None and \
                writer.empty_if_committed(path, st.st_ino, committed):
            sweep.emptied.append(path)
    return sweep


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
