"""A corrupt checkpoint database is moved aside and rebuilt, not a start-up failure.

The state is rebuildable: positions only save re-reading, and what must never be lost, which entries were
already delivered, is in the outputs themselves: every line of the JSONL output carries its ``event.id``.
So when ``checkpoints.sqlite`` cannot be opened or fails SQLite's ``quick_check``, it (with its ``-wal``
and ``-shm``) is renamed to ``checkpoints.sqlite.corrupt-<time>``, a new one is created, and the event
ids found in the JSONL outputs are stored as delivered. Every source is then read again from the start and
the dedupe drops whatever is already out: nothing is duplicated, nothing is lost. The rebuild is recorded
under the ``state.rebuilt`` key (reason, where the old file went, how many ids) for ``status``.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from collector.state.checkpoints import CheckpointStore, Commit

log = logging.getLogger(__name__)

REBUILT_KEY = "state.rebuilt"
_EVENT_ID = re.compile(rb'"event\.id":"([0-9a-f]{32})"')
_CHUNK = 50_000


class CorruptState(Exception):
    pass


def open_checkpoints(path: Path, outputs: Iterable[Path], clock: Callable[[], float] = time.time) -> CheckpointStore:
    """The checkpoint store at ``path``, rebuilt from ``outputs`` (JSONL output folders) if it is corrupt."""
    try:
        return _open_checked(path, clock)
    except (sqlite3.DatabaseError, CorruptState, ValueError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
    moved = _move_aside(path)
    log.error("%s is corrupt (%s); moved to %s, rebuilding the delivered ids from the outputs", path, reason,
              moved)
    store = CheckpointStore(path, clock)
    count = 0
    batch: list[str] = []
    for event_id in delivered_ids(outputs):
        batch.append(event_id)
        if len(batch) >= _CHUNK:
            store.commit(Commit(seen_ids=batch))
            count, batch = count + len(batch), []
    count += len(batch)
    store.commit(Commit(seen_ids=batch, kv={REBUILT_KEY: {"at": time.time(), "reason": reason,
                                                          "moved_to": str(moved), "delivered_ids": count}}))
    log.warning("checkpoints rebuilt: %d delivered ids from the outputs; sources are read again from the start "
                "and what is already out is not written again", count)
    return store


def _open_checked(path: Path, clock: Callable[[], float]) -> CheckpointStore:
    store = CheckpointStore(path, clock)
    try:
        verdict = store.integrity()
        if verdict != "ok":
            raise CorruptState(verdict)
        store.positions()  # every stored value decodes
    except BaseException:
        store.close()
        raise
    return store


def _move_aside(path: Path) -> Path:
    target = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}")
    for suffix in ("", "-wal", "-shm"):
        source = Path(str(path) + suffix)
        if os.path.lexists(source):
            os.replace(source, Path(str(target) + suffix))
    return target


def delivered_ids(outputs: Iterable[Path]) -> Iterator[str]:
    """Every event id in the JSONL output files (``activity-*.jsonl``) under ``outputs``."""
    for folder in outputs:
        for file in sorted(folder.glob("activity-*.jsonl")):
            try:
                with file.open("rb") as f:
                    for line in f:
                        match = _EVENT_ID.search(line)
                        if match:
                            yield match.group(1).decode()
            except OSError as exc:
                log.warning("cannot read %s for the rebuild: %s", file, exc)
