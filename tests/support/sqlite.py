"""The sqlite source on a small table of the tests' own (``item``: id, updated, body): the spec, the
database, reading every item of one cycle, and a source that records every statement it runs."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from collector.sources.base import Item
from collector.sources.sqlite_rows import SqliteRows
from collector.sources.sqlite_specs import TableSpec

SPEC = [TableSpec("item", "updated", "id")]


def make_db(path: Path, wal: bool = True) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=0)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")  # keep everything in the -wal file
    conn.execute("CREATE TABLE item (id TEXT PRIMARY KEY, updated INTEGER, body TEXT)")
    return conn


def read(source: SqliteRows) -> list[Item]:
    async def go() -> list[Item]:
        return [item async for item in source.read()]

    return asyncio.run(go())


def rows(items: list[Item]) -> list[tuple[str, int]]:
    return [(r.data["row"]["id"], r.data["row"]["updated"]) for r, _ in items if r is not None]


class Traced(SqliteRows):
    """The real source, recording every statement its connections run."""

    statements: list[str]

    def _connect(self) -> sqlite3.Connection:
        conn = super()._connect()
        conn.set_trace_callback(self.statements.append)
        return conn


def traced(db: Path, spec: list[TableSpec], **kw: Any) -> Traced:
    source = Traced("s", "a", str(db), spec, {}, **kw)
    source.statements = []
    return source
