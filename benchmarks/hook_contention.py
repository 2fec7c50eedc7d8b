#!/usr/bin/env python3
"""The spool hook script under load: one call with a small and a 100 KB payload next to `sh -c true`,
then N hooks of 100 KB, K at once, with no lock (are all lines intact?).

    .venv/bin/python benchmarks/hook_contention.py [--n 200] [--writers 300] [--at-once 16]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOOK = ROOT / "hooks" / "agent-collector-hook.sh"


def timed(argv: list[str], stdin: bytes, n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        subprocess.run(argv, input=stdin, stdout=subprocess.DEVNULL, check=False)
        out.append((time.perf_counter() - started) * 1000)
    return out


def line(name: str, ms: list[float]) -> str:
    ms = sorted(ms)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"{name:<34} median {statistics.median(ms):7.2f} ms   p99 {p99:7.2f} ms"


def parallel(spool: Path, writers: int, at_once: int, body: bytes) -> tuple[float, int, int]:
    started = time.perf_counter()
    argv = ["bash", str(HOOK), "claude-code", "PostToolUse", str(spool)]
    running: list[subprocess.Popen[bytes]] = []
    for _ in range(writers):
        if len(running) == at_once:
            running.pop(0).wait()
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE)
        assert proc.stdin is not None
        proc.stdin.write(body)
        proc.stdin.close()
        running.append(proc)
    for proc in running:
        proc.wait()
    took = time.perf_counter() - started
    good = bad = 0
    for path in (spool / "claude-code").glob("*.jsonl"):
        for raw in path.read_bytes().splitlines():
            try:
                json.loads(raw)
                good += 1
            except ValueError:
                bad += 1
    return took, good, bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--writers", type=int, default=300)
    ap.add_argument("--at-once", type=int, default=16)
    args = ap.parse_args()
    small = json.dumps({"session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"},
                        "tool_response": {"stdout": "x" * 500}}).encode()
    large = json.dumps({"session_id": "s", "tool_response": {"stdout": "ab" * 50_000}}).encode()
    with tempfile.TemporaryDirectory() as tmp:
        spool = Path(tmp)
        print(f"{args.n} sequential calls each, started as `bash script ...` (what install writes)")
        hook = ["bash", str(HOOK), "claude-code", "X", str(spool)]
        print(line("sh -c true", timed(["sh", "-c", "true"], small, args.n)))
        print(line(f"hook, {len(small)} B payload", timed(hook, small, args.n)))
        print(line(f"hook, {len(large) // 1000} KB payload", timed(hook, large, max(20, args.n // 5))))
    with tempfile.TemporaryDirectory() as tmp:
        took, good, bad = parallel(Path(tmp), args.writers, args.at_once, large)
        print(f"{args.writers} hooks of {len(large) // 1000} KB, {args.at_once} at once, no lock: {took:.2f} s wall, "
              f"{good} intact lines, {bad} broken")


if __name__ == "__main__":
    main()
