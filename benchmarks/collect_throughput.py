#!/usr/bin/env python3
"""`collect --once` throughput over >= 200 MB of Claude-format transcripts, masking on, next to plain
JSON parsing (orjson and json) of the same files in the same run.

    .venv/bin/python benchmarks/collect_throughput.py [--mb 200]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _claude_corpus import generate  # noqa: E402


def parse_all(files: list[Path], loads) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """Seconds to decode every line of ``files`` and the number of lines decoded (a line that does not
    decode raises: the corpus is the real transcript replayed)."""
    started = time.perf_counter()
    n = 0
    for path in files:
        with path.open("rb") as f:
            for line in f:
                loads(line)
                n += 1
    return time.perf_counter() - started, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        files_n, size = generate(home / ".claude" / "projects", args.mb * 1024 * 1024)
        files = sorted((home / ".claude" / "projects").glob("*/*.jsonl"))
        mb = size / 1024 / 1024
        print(f"corpus: {files_n} files, {mb:.0f} MB")
        t_orjson, decoded = parse_all(files, orjson.loads)
        t_json, decoded_json = parse_all(files, json.loads)
        if decoded == 0 or decoded != decoded_json:
            raise SystemExit(f"benchmark stopped: the JSON floors decoded {decoded} / {decoded_json} lines")
        env = {**os.environ, "AGENT_COLLECTOR_DATA_DIR": f"{tmp}/data", "AGENT_COLLECTOR_CONFIG_DIR": f"{tmp}/cfg",
               "AGENT_COLLECTOR_MASKING__ENABLED": "true"}
        cmd = [sys.executable, "-m", "collector", "collect", "--once", "--home", str(home), "--output", f"{tmp}/out"]
        started = time.perf_counter()
        subprocess.run(cmd, env=env, check=True)
        t_collect = time.perf_counter() - started
        lines = sum(p.read_bytes().count(b"\n") for p in Path(tmp, "out").glob("*.jsonl"))
        if lines == 0:
            raise SystemExit("benchmark stopped: collect --once exited 0 but wrote no entry")
        print(f"plain orjson.loads of every line: {mb / t_orjson:8.1f} MB/s ({t_orjson:.2f}s)")
        print(f"plain json.loads of every line:   {mb / t_json:8.1f} MB/s ({t_json:.2f}s)")
        print(f"agent-collector collect --once:   {mb / t_collect:8.1f} MB/s ({t_collect:.2f}s, process start "
              f"included, masking on, {lines} entries written)")


if __name__ == "__main__":
    main()
