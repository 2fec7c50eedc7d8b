"""Throughput of the sqlite source plus the OpenCode parser, and the cost of polling an unchanged database.

    .venv/bin/python benchmarks/sqlite_source.py [--rows 20000]

Builds an OpenCode-shaped database in WAL mode (one session, completed assistant messages, tool parts,
everything left in the -wal file), reads it with ``SqliteRows`` and parses every row, then measures a poll
that finds nothing new (what the daemon does every cycle while OpenCode is idle).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from collector.agents import opencode
from collector.sources.sqlite_rows import SqliteRows, TableSpec

TABLES = [
    TableSpec("session", "time_updated", "id"),
    TableSpec("message", "time_updated", "id"),
    TableSpec("part", "time_updated", "id"),
]
SCHEMA = """
CREATE TABLE session (id TEXT PRIMARY KEY, directory TEXT, version TEXT, time_created INTEGER,
                      time_updated INTEGER);
CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, time_updated INTEGER,
                      data TEXT);
CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, time_created INTEGER,
                   time_updated INTEGER, data TEXT);
"""


def build(path: Path, rows: int) -> sqlite3.Connection:
    """The writer stays open (as OpenCode's would), so the rows stay in the -wal file."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.executescript(SCHEMA)
    conn.execute("INSERT INTO session VALUES ('ses_1', '/w', '1.18.33', 1, 1)")
    messages, parts = [], []
    for n in range(rows // 2):
        data = {
            "role": "assistant",
            "parentID": "msg_u",
            "modelID": "m",
            "providerID": "p",
            "finish": "tool-calls",
            "time": {"created": n, "completed": n + 5},
            "cost": 0,
            "tokens": {"input": 5000 + n, "output": 40, "reasoning": 0, "cache": {"read": 2000, "write": 0}},
        }
        messages.append((f"msg_{n:07}", "ses_1", n, n + 5, json.dumps(data)))
        part = {
            "type": "tool",
            "tool": "bash",
            "callID": f"call_{n}",
            "state": {
                "status": "completed",
                "input": {"command": "ls"},
                "output": "a\nb\n",
                "metadata": {"exit": 0},
                "time": {"start": n, "end": n + 3},
            },
        }
        parts.append((f"prt_{n:07}", f"msg_{n:07}", "ses_1", n, n + 4, json.dumps(part)))
    conn.executemany("INSERT INTO message VALUES (?, ?, ?, ?, ?)", messages)
    conn.executemany("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)", parts)
    return conn


async def drain(source: SqliteRows) -> tuple[int, int]:
    records = entries = 0
    async for record, _ in source.read():
        if record is not None:
            records += 1
            entries += len(opencode.parse(record))
    return records, entries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=20000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "opencode.db"
        writer = build(db, args.rows)
        wal = Path(f"{db}-wal").stat().st_size
        source = SqliteRows("bench", "opencode", str(db), TABLES, {})
        start = time.perf_counter()
        records, entries = asyncio.run(drain(source))
        first = time.perf_counter() - start
        polls = 200
        start = time.perf_counter()
        for _ in range(polls):
            asyncio.run(drain(source))
        idle = (time.perf_counter() - start) / polls
        writer.close()
    print(f"rows read: {records} ({wal / 1e6:.1f} MB in the -wal file), entries made: {entries}")
    print(
        f"first read + parse: {first:.2f} s = {records / first:,.0f} rows/s, {entries / first:,.0f} entries/s"
    )
    print(f"poll of an unchanged database (3 tables): {idle * 1000:.2f} ms")


if __name__ == "__main__":
    main()
