#!/usr/bin/env python3
"""Http hook latency while the daemon backfills: the answer waits only for its own line to be durable
(group-committed spool write), never for a pipeline batch.

A throwaway home gets ``--mb`` of Claude Code transcripts (real fixture records with fresh ids); the real
daemon (`agent-collector run`) starts on it and, while it reads them, ``--n`` hooks are posted the way
Claude Code posts them (a new connection each, with the user's secret), 20 ms apart. Prints the median
and p99 answer time during the backfill, then the same with the daemon idle, and checks that every
answered hook is in the spool.

    .venv/bin/python benchmarks/hook_latency_backfill.py [--mb 200] [--n 500]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

from _claude_corpus import generate  # noqa: E402
from _hook_sample import free_port  # noqa: E402
from support.hook_posting import HookClient, post_hooks, pre_tool_use  # noqa: E402  (shared with the crash test)


def post_all(port: int, token: str, numbers: range, between: Callable[[], None] = lambda: None) -> list[float]:
    """Post one hook per number, a new connection each (as Claude Code does); every answer must be a 200."""
    client = HookClient(port, token, keep_alive=False)
    answers: list[float] = []

    def answered(key: str, status: int | None, ms: float) -> None:
        assert status == 200, f"{key}: {status}"
        answers.append(ms)
        between()

    post_hooks(client, ((f"toolu_bench_{n:06d}", pre_tool_use("bench-backfill", f"toolu_bench_{n:06d}"))
                        for n in numbers), answered)
    return answers


def summary(name: str, ms: list[float]) -> str:
    ms = sorted(ms)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"| {name} | {len(ms)} | {statistics.median(ms):.2f} | {p99:.2f} | {max(ms):.2f} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--n", type=int, default=500)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        files, size = generate(home / ".claude" / "projects" / "-bench", args.mb * 1024 * 1024)
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_COLLECTOR_", "OTEL_"))}
        env.update(HOME=str(home), AGENT_COLLECTOR_HOME=str(home), AGENT_COLLECTOR_INGEST__PORT=str(port))
        state = home / ".local" / "share" / "agent-collector" / "state"
        daemon = subprocess.Popen([sys.executable, "-m", "collector", "run"], cwd=ROOT, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not (state / "ingest.token").exists() or not _listening(port):
                assert time.monotonic() < deadline, "the daemon did not start"
                time.sleep(0.05)
            token = (state / "ingest.token").read_text().strip()
            written = [_output_bytes(home)]

            def between() -> None:
                written.append(_output_bytes(home))
                time.sleep(0.02)

            during = post_all(port, token, range(args.n), between)
            busy = sum(1 for a, b in zip(written, written[1:], strict=False) if b > a)
            _wait_until_quiet(home)
            idle = post_all(port, token, range(args.n, args.n + min(args.n, 200)))
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(60)
        spool = home / ".local" / "share" / "agent-collector" / "spool" / "claude-code"
        lines = sum(f.read_bytes().count(b"\n") for f in spool.glob("*.http.jsonl"))
    print(f"backfill: {files} transcripts, {size / 1e6:.0f} MB; hooks posted 20 ms apart, a new connection each")
    print(f"output grew during {busy} of the {len(during)} hook intervals (the backfill was running)")
    print("| when | hooks | median ms | p99 ms | max ms |")
    print("|---|---|---|---|---|")
    print(summary("during the backfill", during))
    print(summary("daemon idle", idle))
    print(f"every answered hook is in the spool: {lines >= len(during) + len(idle)} ({lines} lines)")


def _output_bytes(home: Path) -> int:
    out = home / ".local" / "share" / "agent-collector" / "output"
    return sum(p.stat().st_size for p in out.glob("activity-*.jsonl")) if out.is_dir() else 0


def _wait_until_quiet(home: Path, quiet_s: float = 3.0, limit_s: float = 1800.0) -> None:
    deadline = time.monotonic() + limit_s
    last, since = _output_bytes(home), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < quiet_s:
        time.sleep(0.5)
        now = _output_bytes(home)
        if now != last:
            last, since = now, time.monotonic()


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


if __name__ == "__main__":
    main()
