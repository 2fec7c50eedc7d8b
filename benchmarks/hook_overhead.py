#!/usr/bin/env python3
"""Wall time of one hook call (what the agent waits for), next to `true`, with a real Claude Code
PostToolUse payload on stdin. Both are started the way an agent starts a command hook: `sh -c CMD`.

    .venv/bin/python benchmarks/hook_overhead.py [--n 500]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "fixtures" / "claude-code" / "tool_then_answer" / "spool"


def payload() -> bytes:
    for path in SAMPLE.glob("*/*.jsonl"):
        for line in path.read_text().splitlines():
            envelope = json.loads(line)
            if envelope["event"] == "PostToolUse":
                return json.dumps(envelope["payload"]).encode()
    raise SystemExit("no PostToolUse sample")


def timed(cmd: str, stdin: bytes, n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        subprocess.run(["sh", "-c", cmd], input=stdin, stdout=subprocess.DEVNULL, check=False)
        out.append((time.perf_counter() - started) * 1000)
    return out


def summary(name: str, ms: list[float]) -> str:
    ms = sorted(ms)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"{name:<28} median {statistics.median(ms):6.2f} ms   p99 {p99:6.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=500)
    args = ap.parse_args()
    body = payload()
    with tempfile.TemporaryDirectory() as spool:
        script = os.environ.get("HOOK", str(ROOT / "hooks" / "agent-collector-hook.sh"))  # HOOK: try another
        hook = f"sh '{script}' claude-code PostToolUse '{spool}'"
        base = timed("true", body, args.n)
        hooked = timed(hook, body, args.n)
        lines = sum(p.read_bytes().count(b"\n") for p in Path(spool).rglob("*.jsonl"))
    print(f"payload {len(body)} bytes, {args.n} calls each; {lines} spool lines written")
    print(summary("true", base))
    print(summary("agent-collector-hook.sh", hooked))
    added = statistics.median(hooked) - statistics.median(base)
    print(f"added by the hook over `true`: median {added:.2f} ms")


if __name__ == "__main__":
    main()
