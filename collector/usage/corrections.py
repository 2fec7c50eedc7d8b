"""A correction (``collector.correction``: a model call delivered again with more exact usage, docs/merge.md)
replaces the stored row of its ``event.id`` in place: the row is taken out of the rollups, updated, and
added to them again, inside the batch's transaction. A correction whose row is not stored (the first
version never reached the store) is inserted like any entry."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import collector.usage.rollup as rollup
import collector.usage.session_rollup as session_rollup

CORRECTION = "collector.correction"


def split(entries: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(entries to insert, corrections of rows stored before). A correction of an entry of the same batch
    (a rebuild from the JSONL output reads both) takes that entry's place."""
    if not any(e.get(CORRECTION) for e in entries):
        return list(entries), []
    plain: list[dict[str, Any]] = []
    where: dict[Any, int] = {}
    corrections: list[dict[str, Any]] = []
    for entry in entries:
        eid = entry.get("event.id")
        if not entry.get(CORRECTION):
            where.setdefault(eid, len(plain))
            plain.append(entry)
        elif eid in where:
            plain[where[eid]] = entry
        else:
            corrections.append(entry)
    return plain, corrections


def stored_id(db: sqlite3.Connection, key: int, event_id: str, upto: int) -> int | None:
    """The row id of ``event_id`` (its key ``key``): in ``event_keys``, or among the rows above ``upto``
    whose keys wait in memory."""
    row = db.execute("SELECT e.id FROM event_keys x JOIN events e ON e.id = x.id WHERE x.k = ? AND e.event_id = ?",
                     (key, event_id)).fetchone()
    if row is None:
        row = db.execute("SELECT id FROM events WHERE id > ? AND k = ? AND event_id = ?",
                         (upto, key, event_id)).fetchone()
    return int(row[0]) if row else None


def apply(db: sqlite3.Connection, updates: list[tuple[int, tuple[Any, ...]]], columns: Sequence[str],
          nullable: frozenset[str]) -> None:
    """Replace each stored row (row id, its new values in ``columns`` order) and the rollups' sums of it."""
    if not updates:
        return
    ids = [rowid for rowid, _ in updates]
    rollup.add_rows(db, ids, remove=True)
    session_rollup.add_rows(db, ids, remove=True)
    sets = ",".join(f"{c} = NULLIF(?, '')" if c in nullable else f"{c} = ?" for c in columns)
    db.executemany(f"UPDATE events SET {sets} WHERE id = ?", [(*values, rowid) for rowid, values in updates])
    rollup.add_rows(db, ids)
    session_rollup.add_rows(db, ids)
