"""The work floor of benchmarks/work_floor.py, run as its own process so its CPU is measured like the
others': what any collector with agent-collector's outputs must do per entry, in plain Python and
none of our code. Given the collector's own JSONL output (argv[1]: a list file of its paths) and a
scratch folder (argv[2]), for every entry: build it (a dict copy: a parser builds at least that), give it
an id (a SHA-256 of its identity fields), write it as one JSON line, remember the id for dedupe and store
its numbers as one row appended to a usage table with a unique index on 8 bytes of the id (the index is
also the dedupe), in SQLite committed per batch of 2,000 (WAL, synchronous=FULL), as the JSONL output
is fsynced. No masking, no content digests, no session state, no
checkpoint of positions: a lower bound of the collector's work beyond parsing its input.

The entries are read (orjson) before the clock starts, and only the work is timed. argv[3] = "jsonl":
the same without SQLite (build, id, JSON line, fsync per batch only).
"""

from __future__ import annotations

import hashlib
import os
import resource
import sqlite3
import sys
from pathlib import Path
from typing import Any

import orjson

COLUMNS = ("event.id", "event.name", "time_unix_nano", "gen_ai.agent.type", "gen_ai.session.id", "gen_ai.turn.id",
           "gen_ai.agent.scope", "gen_ai.provider.name", "gen_ai.response.model", "gen_ai.usage.input_tokens",
           "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens",
           "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.reasoning_tokens", "gen_ai.usage.cost_usd",
           "duration_ms", "gen_ai.tool.name", "tool.result.status", "error.type", "http.response.status_code")
BATCH = 2000


def _db(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    names = ", ".join(f"c{n}" for n in range(len(COLUMNS)))
    db.executescript(f"CREATE TABLE events (id INTEGER PRIMARY KEY, key INTEGER NOT NULL, {names}); "
                     "CREATE UNIQUE INDEX events_key ON events(key);")
    return db


def work(entries: list[dict[str, Any]], scratch: Path, sqlite: bool = True) -> None:
    db = _db(scratch / "floor.sqlite") if sqlite else None
    out = open(scratch / "floor.jsonl", "wb")  # noqa: SIM115 - closed below
    placeholders = ", ".join("?" * (len(COLUMNS) + 2))
    for start in range(0, len(entries), BATCH):
        rows, lines = [], []
        for source in entries[start:start + BATCH]:
            entry = dict(source)
            identity = f"{entry['gen_ai.agent.type']}\x1f{entry.get('gen_ai.session.id')}\x1f{entry['event.name']}" \
                       f"\x1f{entry['time_unix_nano']}"
            digest = hashlib.sha256(identity.encode()).digest()
            entry["event.id"] = digest[:16].hex()
            lines.append(orjson.dumps(entry))
            rows.append((None, int.from_bytes(digest[:8], "big", signed=True),
                         *(entry.get(c) if not isinstance(entry.get(c), dict | list) else None for c in COLUMNS)))
        out.write(b"\n".join(lines) + b"\n")
        out.flush()
        os.fsync(out.fileno())
        if db is None:
            continue
        db.execute("BEGIN")
        db.executemany(f"INSERT OR IGNORE INTO events VALUES ({placeholders})", rows)
        db.execute("COMMIT")
    out.close()
    if db is not None:
        db.close()


def main() -> None:
    paths = Path(sys.argv[1]).read_text().splitlines()
    entries = [orjson.loads(line) for p in paths for line in Path(p).read_bytes().splitlines() if line.strip()]
    before = resource.getrusage(resource.RUSAGE_SELF)
    work(entries, Path(sys.argv[2]), sqlite=sys.argv[3:] != ["jsonl"])
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"{len(entries)} {cpu:.3f}")


if __name__ == "__main__":
    main()
