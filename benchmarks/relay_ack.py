#!/usr/bin/env python3
"""The durable acknowledgement of an http hook, alone: how long ``SpoolRelay.submit`` takes from the
request's line to the moment its line is on disk and the event loop knows it (what a hook's answer
waits for in the ingest server), next to a bare ``write`` + ``fdatasync`` of the same line in the same
run (the floor durability costs on this disk).

Each side submits one line every ``--gap-ms`` from an asyncio loop, idle and while another thread burns
the CPU in Python (as the delivery worker does while it parses a backfill: the relay's threads then wait
for the GIL at each hand-over). The spool is in a temporary folder on the checkout's file system (not
/tmp when that is a tmpfs, where an fsync costs nothing).

    .venv/bin/python benchmarks/relay_ack.py [--n 300] [--gap-ms 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PAYLOAD: dict[str, Any] = {"session_id": "s" * 36, "hook_event_name": "PostToolUse", "tool_name": "Bash",
                           "tool_input": {"command": "ls -la " + "x" * 300}, "tool_response": {"stdout": "y" * 200}}


def burn(stop: threading.Event) -> None:
    """Python work that holds the GIL, like a parser's loop."""
    rows: list[dict[str, int]] = []
    while not stop.is_set():
        rows = [{"i": i, "sq": i * i} for i in range(2000)]
    del rows


async def relay_ms(folder: Path, n: int, gap_s: float) -> list[float]:
    from collector.ingest.relay import SpoolRelay
    from collector.sources.spool_writer import SpoolWriter

    writer = SpoolWriter(folder)
    relay = SpoolRelay(writer)
    out: list[float] = []
    try:
        for i in range(n + 1):
            await asyncio.sleep(gap_s)
            started = time.perf_counter()
            await relay.submit("claude-code", "PostToolUse", PAYLOAD, time.time())
            if i:  # the first opens the file
                out.append((time.perf_counter() - started) * 1000)
    finally:
        relay.close()
        writer.close()
    return out


def floor_ms(folder: Path, n: int, gap_s: float) -> list[float]:
    import orjson

    fd = os.open(folder / "floor.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    out = []
    try:
        for _ in range(n):
            time.sleep(gap_s)
            started = time.perf_counter()
            os.write(fd, orjson.dumps({"payload": PAYLOAD}) + b"\n")
            os.fdatasync(fd)
            out.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(fd)
    return out


def row(name: str, ms: list[float]) -> str:
    ordered = sorted(ms)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"| {name} | {statistics.median(ordered):.3f} | {p99:.3f} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--gap-ms", type=float, default=10.0)
    args = ap.parse_args()
    gap = args.gap_ms / 1000
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(dir=ROOT) as tmp:
        folder = Path(tmp)
        rows["write + fdatasync, idle (floor)"] = floor_ms(folder, args.n, gap)
        rows["relay ack, idle"] = asyncio.run(relay_ms(folder / "idle", args.n, gap))
        stop = threading.Event()
        burner = threading.Thread(target=burn, args=(stop,), daemon=True)
        burner.start()
        try:
            rows["write + fdatasync, CPU thread busy (floor)"] = floor_ms(folder, args.n, gap)
            rows["relay ack, CPU thread busy"] = asyncio.run(relay_ms(folder / "busy", args.n, gap))
        finally:
            stop.set()
            burner.join()
    print(f"{args.n} hooks each, {args.gap_ms:g} ms apart")
    print("| what | median ms | p99 ms |")
    print("|---|---|---|")
    for name, ms in rows.items():
        print(row(name, ms))


if __name__ == "__main__":
    main()
