"""The parse floor of benchmarks/peers.py: `orjson.loads` of every line of the files named in the list file
(argv[1]), and of every JSON value of an OpenCode database's session, message and part rows (every text
column whose value starts with `[` or `{`: a collector must read each part's `data` to know what it
holds). Run as its own process so that its CPU is measured like the others'.

It prints what it did as one JSON object, so that the benchmark can check it did the work before using its
CPU: `lines` decoded and `bad_lines` that did not decode, `file_bytes` read, `rows` read and JSON `values`
decoded from them (`bad_values`: a column that looked like JSON and did not decode)."""

from __future__ import annotations

import sqlite3
import sys
from dataclasses import asdict, dataclass

import orjson


@dataclass
class Done:
    lines: int = 0
    bad_lines: int = 0
    file_bytes: int = 0
    rows: int = 0
    values: int = 0
    bad_values: int = 0


def lines(path: str, done: Done) -> None:
    with open(path, "rb") as f:
        for line in f:
            done.file_bytes += len(line)
            if line.strip():
                try:
                    orjson.loads(line)
                except orjson.JSONDecodeError:
                    done.bad_lines += 1
                else:
                    done.lines += 1


def rows(path: str, done: Done) -> None:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    for table in ("session", "message", "part"):
        for row in con.execute(f"SELECT * FROM {table}"):
            for value in row:
                # `value[:1] in "[{"` was true for '' (an empty `path` column): orjson.loads('') raised
                if isinstance(value, str) and value and value[0] in "[{":
                    try:
                        orjson.loads(value)
                    except orjson.JSONDecodeError:
                        done.bad_values += 1
                    else:
                        done.values += 1
            done.rows += 1
    con.close()


def main() -> None:
    done = Done()
    with open(sys.argv[1], encoding="utf-8") as f:
        paths = f.read().splitlines()
    for path in paths:
        if path.endswith(".db"):
            rows(path, done)
        else:
            lines(path, done)
    print(orjson.dumps(asdict(done)).decode())


if __name__ == "__main__":
    main()
