"""Throughput of the sqlite source plus the OpenCode parser, and the cost of polling an unchanged database.

    .venv/bin/python benchmarks/sqlite_source.py [--rows 20000]
    .venv/bin/python benchmarks/sqlite_source.py --scale 65000,130000,260000

Builds an OpenCode-shaped database in WAL mode (one session, completed assistant messages, tool parts,
everything left in the -wal file), reads it with ``SqliteRows`` and parses every row, then measures a poll
that finds nothing new (what the daemon does every cycle while OpenCode is idle).

``--scale``: for each row count, the CPU seconds of this process (``time.process_time``: every thread, so
the source's query threads count) of reading the database with the source alone and with the OpenCode
parser, and the ratio to the smallest count (linear: 4x the rows, 4x the CPU). These databases are written
1,000 rows a commit (one commit per row would make a multi-gigabyte -wal), and one row in ten is updated
afterwards (a message gaining its tokens), so the watermark order is not the insertion order.
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
from collector.sources.sqlite_rows import SqliteRows
from collector.sources.sqlite_specs import TableSpec

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


def build(path: Path, rows: int, commit_every: int = 1) -> sqlite3.Connection:
    """The writer stays open (as OpenCode's would), so the rows stay in the -wal file."""
    conn = sqlite3.connect(path, isolation_level=None if commit_every == 1 else "DEFERRED")
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
    if commit_every == 1:
        conn.executemany("INSERT INTO message VALUES (?, ?, ?, ?, ?)", messages)
        conn.executemany("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)", parts)
        return conn
    for table, batch, marks in (("message", messages, 5), ("part", parts, 6)):
        for start in range(0, len(batch), commit_every):
            conn.executemany(f"INSERT INTO {table} VALUES ({','.join('?' * marks)})",
                             batch[start:start + commit_every])
            conn.commit()
    # one message in ten gains its tokens later: a new watermark, read again
    conn.execute("UPDATE message SET time_updated = time_updated + 1000000000 WHERE time_created % 10 = 3")
    conn.commit()
    return conn


async def drain(source: SqliteRows, parse: bool = True) -> tuple[int, int]:
    records = entries = 0
    async for record, _ in source.read():
        if record is not None:
            records += 1
            if parse:
                entries += len(opencode.parse(record))
    return records, entries


def scale(sizes: list[int]) -> None:
    base: tuple[float, float] | None = None
    print("| rows | rows read | source alone CPU s | source + parser CPU s | x rows | x CPU (alone / + parser) |")
    print("|---|---|---|---|---|---|")
    for rows in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "opencode.db"
            writer = build(db, rows, commit_every=1000)
            figures = []
            for parse in (False, True):
                source = SqliteRows("bench", "opencode", str(db), TABLES, {})
                start = time.process_time()
                records, _ = asyncio.run(drain(source, parse))
                figures.append(time.process_time() - start)
            writer.close()
        alone, parsed = figures
        base = base or (alone, parsed)
        print(f"| {rows:,} | {records:,} | {alone:.2f} | {parsed:.2f} | {rows / sizes[0]:.0f} | "
              f"{alone / base[0]:.2f} / {parsed / base[1]:.2f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--scale", help="comma-separated row counts: CPU seconds of each, and the ratios")
    args = ap.parse_args()
    if args.scale:
        scale([int(x) for x in args.scale.split(",")])
        return
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
