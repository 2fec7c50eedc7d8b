"""CPU cost of the idle poll: N transcript files, all read to their end, polled again and again with
nothing new (what the daemon does every poll interval when file events are quiet). Prints CPU ms per
poll and the share of one core at the default 2 s poll interval.

    .venv/bin/python benchmarks/idle_poll.py --files 20000 --polls 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from collector.sources.jsonl_files import JsonlFiles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--polls", type=int, default=20)
    parser.add_argument("--interval", type=float, default=2.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        line = json.dumps({"type": "user", "sessionId": "s", "message": {"content": "x" * 200}}) + "\n"
        for n in range(args.files):
            folder = root / f"p{n // 500}"
            folder.mkdir(exist_ok=True)
            (folder / f"{n}.jsonl").write_text(line * 5)
        source = JsonlFiles("bench:t", "bench", "transcript", [str(root / "*" / "*.jsonl")], {})

        async def poll() -> int:
            return len([item async for item in source.read()])

        first = asyncio.run(poll())
        started = time.process_time()
        for _ in range(args.polls):
            assert asyncio.run(poll()) == 0
        per_poll = (time.process_time() - started) / args.polls
    print(f"{args.files} files ({first} lines read once); idle poll: {per_poll * 1000:.1f} ms CPU each, "
          f"{100 * per_poll / args.interval:.1f} % of a core at a {args.interval:g} s interval")


if __name__ == "__main__":
    main()
