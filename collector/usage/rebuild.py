"""The usage store is rebuildable state: every entry it holds is in the JSONL output, with its id. A store
that is missing while the output has files, or that cannot be read as a database, is rebuilt from the
output at open: a damaged file is moved aside first (``usage.sqlite.corrupt-<unix time>``, with its
``-wal``/``-shm``), then every ``activity-*.jsonl`` is read in day order and added the way the exporter
adds a batch, unique by ``event.id`` (entries delivered again afterwards insert nothing twice). What
happened (when, why, how many entries from which days; output files older than the retention are gone,
so the first day says how far back it reached) is kept in the store's ``meta`` table under ``rebuilt``;
the exporter's stats carry it and `agent-collector status` prints it."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from collector.model.pilot_names import from_pilot_output
from collector.usage.store import UsageStore

log = logging.getLogger(__name__)

BATCH = 5000
META_KEY = "rebuilt"


@dataclass(slots=True)
class Rebuilt:
    at: float
    reason: str
    files: int = 0
    entries: int = 0  # lines read as entries
    added: int = 0  # rows the store did not hold yet
    bad_lines: int = 0  # lines that are not an entry (a torn last line, say): skipped
    first_day: str | None = None
    last_day: str | None = None
    moved_aside: str | None = None


def store_problem(path: Path) -> str | None:
    """Why the store at ``path`` must be rebuilt, or None. A cheap look (the header and the schema), not a
    full integrity check: that would cost every start a pass over the file."""
    if not path.exists():
        return "missing"
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and "events" not in tables:
                return "not a usage store (no events table)"
            if tables:
                db.execute("SELECT key, value FROM meta LIMIT 1").fetchall()
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        return f"unreadable ({exc})"
    return None


def set_aside(path: Path) -> Path:
    aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.replace(f"{path}{suffix}", f"{aside}{suffix}")
    return aside


def _entries(files: list[Path], done: Rebuilt) -> Iterator[dict[str, Any]]:
    for file in files:
        try:
            data = file.read_bytes()
        except OSError as exc:
            log.warning("usage store rebuild: cannot read %s (%s); skipped", file, exc)
            continue
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                done.bad_lines += 1
                continue
            if isinstance(entry, dict) and isinstance(entry.get("event.id"), str):
                yield from_pilot_output(entry)  # the output may use Pilot's names ([jsonl] field_names)
            else:
                done.bad_lines += 1


def rebuild(store: UsageStore, output_dir: Path, reason: str, moved_aside: Path | None = None) -> Rebuilt | None:
    """Add every entry of the output to ``store``; None when the output has nothing to rebuild from."""
    files = sorted(p for p in output_dir.glob("activity-*.jsonl") if p.is_file() and not p.is_symlink())
    if not files:
        return None
    done = Rebuilt(time.time(), reason, files=len(files), moved_aside=str(moved_aside) if moved_aside else None,
                   first_day=files[0].name[9:19], last_day=files[-1].name[9:19])
    log.warning("usage store %s: %s; rebuilding it from %d output files (%s .. %s)", store.path, reason, len(files),
                done.first_day, done.last_day)
    batch: list[dict[str, Any]] = []
    for entry in _entries(files, done):
        batch.append(entry)
        if len(batch) >= BATCH:
            done.added += store.add(batch)
            done.entries += len(batch)
            batch = []
            if done.entries % (20 * BATCH) == 0:
                log.info("usage store rebuild: %d entries so far", done.entries)
    if batch:
        done.added += store.add(batch)
        done.entries += len(batch)
    store.set_meta(META_KEY, orjson.dumps(asdict(done)).decode())
    log.warning("usage store rebuilt: %d entries (%d new rows) from %d files, %d lines skipped", done.entries,
                done.added, done.files, done.bad_lines)
    return done


def last_rebuild(store: UsageStore) -> dict[str, Any] | None:
    text = store.meta(META_KEY)
    if not text:
        return None
    with contextlib.suppress(orjson.JSONDecodeError):
        value = orjson.loads(text)
        return value if isinstance(value, dict) else None
    return None
