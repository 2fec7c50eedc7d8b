"""kill -9 of the real daemon while hooks pour in over HTTP, three times: every hook that got a 200 is in
the spool, and after a final collect in the output exactly once."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from support import read_output

ROOT = Path(__file__).resolve().parents[1]
SESSION = "0b8f1c1e-0000-4000-8000-0000000000d1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _hook(n: int) -> bytes:
    return json.dumps({"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                       "tool_use_id": f"toolu_kill_{n:06d}", "tool_input": {"command": f"echo {n}"}}).encode()


def _sender(port: int, token: str, numbers: list[int], acked: list[int], stop: threading.Event) -> None:
    conn: http.client.HTTPConnection | None = None
    for n in numbers:
        if stop.is_set():
            return
        try:
            conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("POST", "/v1/hooks/claude-code", _hook(n),
                         {"Content-Type": "application/json", "X-Agent-Collector-Token": token})
            response = conn.getresponse()
            response.read()
            if response.status == 200:
                acked.append(n)
        except (OSError, http.client.HTTPException):
            if conn is not None:
                conn.close()
            conn = None
            if stop.is_set():
                return
            time.sleep(0.02)


def test_every_acknowledged_hook_survives_kill_9(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_COLLECTOR_", "OTEL_"))}
    env.update(HOME=str(home), AGENT_COLLECTOR_HOME=str(home), AGENT_COLLECTOR_INGEST__PORT=str(port))
    state = home / ".local" / "share" / "agent-collector" / "state"
    spool = home / ".local" / "share" / "agent-collector" / "spool" / "claude-code"
    acked: list[int] = []
    next_n = 0
    for _round in range(3):
        proc = subprocess.Popen([sys.executable, "-m", "collector", "run", "--home", str(home)], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while not (state / "ingest.token").exists() or not _listening(port):
                assert time.monotonic() < deadline, "the daemon did not start"
                time.sleep(0.05)
            token = (state / "ingest.token").read_text().strip()
            stop = threading.Event()
            numbers = list(range(next_n, next_n + 4000))
            next_n += 4000
            threads = [threading.Thread(target=_sender, args=(port, token, numbers[i::8], acked, stop))
                       for i in range(8)]
            target = len(acked) + 300
            for thread in threads:
                thread.start()
            while len(acked) < target and any(t.is_alive() for t in threads):
                time.sleep(0.005)
            proc.send_signal(signal.SIGKILL)  # mid-stream: requests are in flight
            proc.wait(10)
            stop.set()
            for thread in threads:
                thread.join(10)
        finally:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        on_disk = {json.loads(line)["payload"]["tool_use_id"] for f in spool.glob("*.http.jsonl")
                   for line in f.read_text().splitlines() if line.strip()}
        missing = {f"toolu_kill_{n:06d}" for n in acked} - on_disk
        assert not missing, f"{len(missing)} acknowledged hooks are not in the spool"
    assert len(acked) >= 900
    done = subprocess.run([sys.executable, "-m", "collector", "collect", "--once", "-q", "--home", str(home)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    calls = [e["gen_ai.tool.call.id"] for e in read_output(home / ".local" / "share" / "agent-collector" / "output")
             if e["event.name"] == "tool.call"]
    assert len(calls) == len(set(calls)), "no duplicates"
    assert {f"toolu_kill_{n:06d}" for n in acked} <= set(calls)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False
