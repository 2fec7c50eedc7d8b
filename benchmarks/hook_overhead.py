#!/usr/bin/env python3
"""Wall time of one hook call (what the agent waits for), next to `sh -c true` in the same run, with a
real Claude Code PostToolUse payload on stdin. Every command is started the way an agent starts a
command hook: `sh -c CMD`, and the variants are interleaved call by call so load hits them alike.
Then the time of one call on 2 MB payloads of the worst kinds (newlines, quotes, escapes, invalid).

    .venv/bin/python benchmarks/hook_overhead.py [--n 500] [--big 5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _hook_sample import payload

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = os.environ.get("HOOK", str(ROOT / "hooks" / "agent-collector-hook.sh"))  # HOOK: try another


def big_payloads() -> dict[str, bytes]:
    return {
        "newlines (pretty tool output)": json.dumps({"stdout": ["ab"] * 250_000}, indent=1).encode(),
        "quotes": json.dumps({"text": '"' * 1_000_000}).encode(),
        "escapes": json.dumps({"text": "\\\n\t\u0001é" * 150_000}).encode(),
        "invalid (unterminated string)": b'{"cut": "' + b"\\\"" * 1_000_000,
    }


def one(cmd: str, stdin: bytes) -> tuple[float, float]:
    """(wall ms, CPU ms of the processes it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(["sh", "-c", cmd], input=stdin, stdout=subprocess.DEVNULL, check=False)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    return wall, cpu


def summary(name: str, runs: list[tuple[float, float]]) -> str:
    wall = sorted(w for w, _ in runs)
    p99 = wall[min(len(wall) - 1, int(len(wall) * 0.99))]
    cpu = statistics.mean(c for _, c in runs)
    return f"{name:<44} median {statistics.median(wall):6.2f} ms   p99 {p99:6.2f} ms   cpu {cpu:5.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--big", type=int, default=5, help="calls per 2 MB payload kind")
    args = ap.parse_args()
    body = payload()
    with tempfile.TemporaryDirectory() as spool:
        commands = {
            "sh -c true": "true",
            "bash agent-collector-hook.sh (what install writes)": f"bash '{SCRIPT}' claude-code PostToolUse '{spool}'",
            "sh agent-collector-hook.sh (re-executes bash)": f"sh '{SCRIPT}' claude-code PostToolUse '{spool}'",
            "sh, POSIX fallback (date, tr, flock)":
                f"AGENT_COLLECTOR_HOOK_NO_BASH=1 sh '{SCRIPT}' claude-code PostToolUse '{spool}'",
        }
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.n):
            for name, cmd in commands.items():
                runs[name].append(one(cmd, body))
        lines = sum(p.read_bytes().count(b"\n") for p in Path(spool).rglob("*.jsonl"))
    print(f"payload {len(body)} bytes, {args.n} calls each, interleaved; {lines} spool lines written")
    for name, measured in runs.items():
        print(summary(name, measured))
    base = statistics.median(w for w, _ in runs["sh -c true"])
    hooked = statistics.median(w for w, _ in runs["bash agent-collector-hook.sh (what install writes)"])
    print(f"added by the hook over `sh -c true`: median {hooked - base:.2f} ms")
    print()
    for name, data in big_payloads().items():
        with tempfile.TemporaryDirectory() as spool:
            cmd = f"bash '{SCRIPT}' claude-code PostToolUse '{spool}'"
            measured = [one(cmd, data) for _ in range(args.big)]
        print(summary(f"{len(data) / 1e6:.1f} MB, {name}", measured))


if __name__ == "__main__":
    main()
