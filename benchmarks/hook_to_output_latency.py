#!/usr/bin/env python3
"""Latency from a hook's spool append to the entry in the JSONL output, with `agent-collector run` up.

    .venv/bin/python benchmarks/hook_to_output_latency.py [--n 200]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOOK = ROOT / "hooks" / "agent-collector-hook.sh"


def wait_for(out: Path, needle: bytes, state: dict[str, int], timeout: float = 10.0) -> float:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        for path in out.glob("*.jsonl"):
            size = path.stat().st_size
            start = state.get(path.name, 0)
            if size > start:
                with path.open("rb") as f:
                    f.seek(start)
                    chunk = f.read(size - start)
                if needle in chunk:
                    state[path.name] = size
                    return time.perf_counter()
        time.sleep(0.001)
    raise TimeoutError(needle)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "data", Path(tmp) / "out"
        spool = data / "spool"
        (spool / "claude-code").mkdir(parents=True)
        env = {**os.environ, "AGENT_COLLECTOR_DATA_DIR": str(data), "AGENT_COLLECTOR_CONFIG_DIR": f"{tmp}/cfg",
               "AGENT_COLLECTOR_INGEST__ENABLED": "false"}
        daemon = subprocess.Popen([sys.executable, "-m", "collector", "run", "--home", tmp, "--output", str(out)],
                                  env=env, stderr=subprocess.DEVNULL)
        try:
            time.sleep(2.0)  # start-up
            state: dict[str, int] = {}
            latencies = []
            for i in range(args.n):
                tool_id = f"toolu_lat_{i:05d}"
                payload = {"session_id": "lat-session", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                           "tool_use_id": tool_id, "tool_input": {"command": "true"}, "cwd": tmp}
                subprocess.run(["sh", str(HOOK), "claude-code", "PreToolUse", str(spool)],
                               input=json.dumps(payload).encode(), check=False)
                appended = time.perf_counter()
                seen = wait_for(out, tool_id.encode(), state)
                latencies.append((seen - appended) * 1000)
                time.sleep(0.02)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(10)
    lat = sorted(latencies)
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    print(f"{args.n} hook events: append -> JSONL output latency median {statistics.median(lat):.1f} ms, "
          f"p99 {p99:.1f} ms, max {lat[-1]:.1f} ms")


if __name__ == "__main__":
    main()
