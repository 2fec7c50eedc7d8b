"""The parse floor of benchmarks/peers.py: `orjson.loads` of every line of the files named in the list file
(argv[1]), and of every `data` column of an OpenCode database's session, message and part rows. Run as its
own process so that its CPU is measured like the others'."""

from __future__ import annotations

import contextlib
import sqlite3
import sys

import orjson


def lines(path: str) -> int:
    n = 0
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                with contextlib.suppress(orjson.JSONDecodeError):
                    orjson.loads(line)
                n += 1
    return n


def rows(path: str) -> int:
    n = 0
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    for table in ("session", "message", "part"):
        for row in con.execute(f"SELECT * FROM {table}"):
            for value in row:
                if isinstance(value, str) and value[:1] in "[{":
                    orjson.loads(value)
            n += 1
    con.close()
    return n


def main() -> None:
    total = 0
    with open(sys.argv[1], encoding="utf-8") as f:
        paths = f.read().splitlines()
    for path in paths:
        total += rows(path) if path.endswith(".db") else lines(path)
    print(total)


if __name__ == "__main__":
    main()
