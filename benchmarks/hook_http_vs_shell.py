#!/usr/bin/env python3
"""Wall time one hook event costs the agent: an http hook posting to the running daemon, against the
spool shell hook and a `python3 -c pass` baseline. (The SessionStart relay, curl to the daemon, is gone:
Claude Code's plugin runs the spool hook for every event since 2d090b0.)

The daemon is the real one (`agent-collector run` in a throwaway home, so each post goes all the way
into the spool with its fsync). The last http row posts while the daemon backfills a ``--backfill-mb``
Claude Code transcript backlog that appears at once (the event loop answering hooks while the worker
parses). An http hook is timed the way Claude Code makes it: a new TCP
connection per event (and, for reference, on a kept-alive connection). The command hooks are started
the way an agent starts them, `sh -c CMD`, with a real Claude Code PostToolUse payload on stdin.

    .venv/bin/python benchmarks/hook_http_vs_shell.py [--n 500]
"""

from __future__ import annotations

import argparse
import http.client
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _hook_sample import free_port, payload  # noqa: E402


def timed(call: Callable[[], None], n: int, gap_s: float = 0.0) -> list[float]:
    """``gap_s`` leaves the daemon idle between events, as hooks of one session mostly are."""
    call()  # warm up
    out = []
    for _ in range(n):
        if gap_s:
            time.sleep(gap_s)
        started = time.perf_counter()
        call()
        out.append((time.perf_counter() - started) * 1000)
    return out


def command(cmd: str, body: bytes) -> Callable[[], None]:
    return lambda: None if subprocess.run(["sh", "-c", cmd], input=body, stdout=subprocess.DEVNULL,
                                          check=False) else None


def post_new_connection(port: int, body: bytes, token: str = "") -> Callable[[], None]:
    def call() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("POST", "/v1/hooks/claude-code", body,
                     {"Content-Type": "application/json", "X-Agent-Collector-Token": token})
        response = conn.getresponse()
        assert response.status == 200, response.status
        response.read()
        conn.close()

    return call


def post_kept_alive(port: int, body: bytes, token: str = "") -> Callable[[], None]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)

    def call() -> None:
        conn.request("POST", "/v1/hooks/claude-code", body,
                     {"Content-Type": "application/json", "X-Agent-Collector-Token": token})
        response = conn.getresponse()
        assert response.status == 200, response.status
        response.read()

    return call


BARE_SERVER = """
import asyncio
async def handle(r, w):
    try:
        while True:
            head = await r.readuntil(b"\\r\\n\\r\\n")
            await r.readexactly(int(head.lower().split(b"content-length:")[1].split(b"\\r\\n")[0]))
            w.write(b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\n"
                    b"Content-Length: 2\\r\\n\\r\\n{}")
            await w.drain()
    except Exception:
        w.close()
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


def bare_server() -> tuple[subprocess.Popen[str], int]:
    """The floor: a bare asyncio socket server that answers ``{}`` without looking at the request."""
    proc = subprocess.Popen([sys.executable, "-c", BARE_SERVER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def summary(name: str, ms: list[float], base: float) -> str:
    ordered = sorted(ms)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    median = statistics.median(ordered)
    return f"| {name} | {median:.2f} | {p99:.2f} | {median - base:+.2f} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--backfill-mb", type=int, default=64)
    ap.add_argument("--http-only", action="store_true", help="only the http hook rows (and the floor)")
    args = ap.parse_args()
    from _claude_corpus import generate

    from collector.paths import resolve_paths

    try:
        from collector.ingest.secret import read_token
    except ImportError:  # an older version (before_after.py): no ingest secret yet
        def read_token(paths: Any) -> str:
            return ""

    body = payload()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        (home / ".claude" / "projects").mkdir(parents=True)  # watched from the start: the backlog wakes it
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_COLLECTOR_")}
        env.update(AGENT_COLLECTOR_HOME=str(home), AGENT_COLLECTOR_INGEST__PORT=str(port))
        daemon = subprocess.Popen([sys.executable, "-m", "collector", "run"], cwd=ROOT, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            paths = resolve_paths(home, env={})
            token = read_token(paths) or ""  # the daemon made the user's secret at start
            script = shlex.quote(str(ROOT / "hooks" / "agent-collector-hook.sh"))
            shell_hook = f"sh {script} claude-code PostToolUse {shlex.quote(str(paths.spool_dir))}"
            python = f"{shlex.quote(sys.executable)} -c pass"
            n = args.n
            rows = {} if args.http_only else {
                "`python3 -c pass` (baseline)": timed(command(python, body), n),
                "`true` via `sh -c`": timed(command("true", body), n),
                "spool shell hook (`agent-collector-hook.sh`)": timed(command(shell_hook, body), n),
            }
            rows |= {
                "http hook, new connection, 50 ms apart": timed(post_new_connection(port, body, token), n, 0.05),
                "http hook, kept-alive connection, 50 ms apart": timed(post_kept_alive(port, body, token), n, 0.05),
                "http hook, new connection, back to back": timed(post_new_connection(port, body, token), n),
            }
            staging = Path(tmp) / "staging"
            generate(staging, args.backfill_mb * 1024 * 1024)  # one project folder per transcript file
            for project in sorted(staging.iterdir()):
                os.rename(project, home / ".claude" / "projects" / project.name)
            rows["http hook, new connection, 10 ms apart, daemon backfilling"] = timed(
                post_new_connection(port, body, token), min(n, 150), 0.01)
            bare, bare_port = bare_server()
            try:
                rows["floor: bare asyncio server, kept-alive, 50 ms apart"] = timed(
                    post_kept_alive(bare_port, body), n, 0.05)
            finally:
                bare.kill()
                bare.wait()
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(20)
    base = statistics.median(rows.get("`python3 -c pass` (baseline)") or [0.0])
    print(f"payload {len(body)} bytes, {args.n} calls each, daemon = `agent-collector run` (spool + fsync)")
    print("| hook | median ms | p99 ms | vs python3 -c pass |")
    print("|---|---|---|---|")
    for name, ms in rows.items():
        print(summary(name, ms, base))


if __name__ == "__main__":
    main()
