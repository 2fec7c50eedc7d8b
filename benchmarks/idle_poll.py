"""CPU cost of the idle poll: N transcript files, all read to their end, polled again and again with
nothing new. Two figures: the daemon's sweep when file events work (every ``--interval`` seconds the
folders whose mtime moved are listed again and ``interval / rescan`` of the files are stat-ed, so each
is checked every ``--rescan`` seconds), and the full walk (every file stat-ed: ``collect --once``, and
every poll of a daemon without file events). Prints CPU ms per poll and the share of one core at the
default 2 s poll interval.

    .venv/bin/python benchmarks/idle_poll.py --files 20000 --polls 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from collector.sources.base import Scope
from collector.sources.jsonl_files import JsonlFiles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--polls", type=int, default=20)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--rescan", type=float, default=30.0, help="collector.rescan_s")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        line = json.dumps({"type": "user", "sessionId": "s", "message": {"content": "x" * 200}}) + "\n"
        for n in range(args.files):
            folder = root / f"p{n // 500}"
            folder.mkdir(exist_ok=True)
            (folder / f"{n}.jsonl").write_text(line * 5)
        source = JsonlFiles("bench:t", "bench", "transcript", [str(root / "*" / "*.jsonl")], {})

        async def poll(scope: Scope | None) -> int:
            source.narrow(scope)
            return len([item async for item in source.read()])

        def per_poll(scope: Scope | None) -> float:
            started = time.process_time()
            for _ in range(args.polls):
                assert asyncio.run(poll(scope)) == 0
            return (time.process_time() - started) / args.polls

        first = asyncio.run(poll(None))
        full = per_poll(None)
        sweep = per_poll(Scope(frozenset(), min(1.0, args.interval / args.rescan)))
    print(f"{args.files} files ({first} lines read once); at a {args.interval:g} s interval, idle poll: "
          f"sweep (file events on, rescan {args.rescan:g} s) {sweep * 1000:.1f} ms CPU each = "
          f"{100 * sweep / args.interval:.2f} % of a core; full walk (no file events) {full * 1000:.1f} ms = "
          f"{100 * full / args.interval:.1f} %")


if __name__ == "__main__":
    main()
