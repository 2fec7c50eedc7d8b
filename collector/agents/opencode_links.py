"""OpenCode sub-agents: which ``task`` tool call started a child session, looked up in ``opencode.db``.

OpenCode's ``task`` tool runs a sub-agent as a child session (``session.parent_id`` = the parent) and
records the child's id in the task call's part (``state.metadata.sessionId``, written while it runs).
The child's own rows do not name the call, and a backfill reads the ``session`` and ``message`` tables
before the ``part`` table. So the definition reads the child's ``session`` row with the parent's tool parts
that name it (``related`` ``task_parts``, in the same query: ``call_in``); for a row without that column (a
definition of one's own without it) the parser asks the database itself (``task_call``). Read-only
(``mode=ro``), a short busy timeout; answers are cached per state of the database file (its and its
``-wal``'s size and mtime), so a miss is asked again once OpenCode wrote more.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from typing import Any

import orjson

from collector.model.decode import loads_text

BUSY_TIMEOUT_S = 0.2


def call_in(parts: Any, child: str) -> str | None:
    """The call id of the ``task`` call that runs ``child`` among ``parts`` (a JSON array of part rows'
    ``data``, as the definition's ``related`` ``task_parts`` reads them with the child's session row)."""
    try:
        rows = loads_text(parts) if isinstance(parts, (str, bytes)) else None
    except orjson.JSONDecodeError:
        return None
    if not isinstance(rows, list):
        return None
    return next((call for call in (_call_of(raw, child) for raw in rows) if call is not None), None)


def task_call(db_path: str, parent: str, child: str) -> str | None:
    """The call id of the parent session's ``task`` call that runs ``child``, once OpenCode wrote it."""
    return _call_at(db_path, parent, child, _stamp(db_path))


def _stamp(db_path: str) -> tuple[int, ...]:
    """The database's and its -wal's size and mtime: a write moves one of them."""
    out: list[int] = []
    for path in (db_path, db_path + "-wal"):
        try:
            st = os.stat(path)
        except OSError:
            out += [-1, -1]
            continue
        out += [st.st_size, st.st_mtime_ns]
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def _call_at(db_path: str, parent: str, child: str, stamp: tuple[int, ...]) -> str | None:
    """The answer for the database as it is at ``stamp`` (so a miss is asked again after a write)."""
    try:
        rows = _query(db_path, parent, child)
    except sqlite3.Error:
        return None
    return next((call for call in map(lambda raw: _call_of(raw, child), rows) if call is not None), None)


def _query(db_path: str, parent: str, child: str) -> list[Any]:
    uri = "file:" + db_path.replace("?", "%3f").replace("#", "%23") + "?mode=ro"
    con = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S)
    try:
        cursor = con.execute("SELECT data FROM part WHERE session_id = ? AND instr(data, ?) > 0",
                             (parent, child))
        return [row[0] for row in cursor.fetchmany(64)]
    finally:
        con.close()


def _call_of(raw: Any, child: str) -> str | None:
    try:
        data = loads_text(raw)
    except (orjson.JSONDecodeError, TypeError):
        return None
    if not isinstance(data, dict) or data.get("type") != "tool":
        return None
    state = data.get("state")
    metadata = state.get("metadata") if isinstance(state, dict) else None
    call = data.get("callID")
    if isinstance(metadata, dict) and metadata.get("sessionId") == child and isinstance(call, str):
        return call
    return None
