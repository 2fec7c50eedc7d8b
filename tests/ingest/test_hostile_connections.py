"""128 idle keep-alive connections (every one the ingest allows), or 200 half-open ones that never send
a request head (no token needed), no longer lock the ingest out: a new connection closes the longest-idle
one, else the oldest half-open one, and is served. Through the real daemon: every hook posted before and
after is in the output exactly once, the daemon answers, and its status counts the closed connections."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from support import assert_no_duplicates
from support.robust import Daemon

SESSION = "0b8f1c1e-0000-4000-8000-00000000c0de"
IDLE = 128  # the ingest's max_connections


def hook(i: int) -> bytes:
    return json.dumps({"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                       "tool_use_id": f"toolu_{i:06d}", "tool_input": {"command": f"echo {i}"}}).encode()


def keep_alive_post(daemon: Daemon, body: bytes) -> socket.socket:
    """POST one hook on a new connection, read the answer, and leave the connection open and idle."""
    token = (daemon.data / "state" / "ingest.token").read_text().strip()
    conn = socket.create_connection(("127.0.0.1", daemon.port), timeout=10)
    conn.sendall(f"POST /v1/hooks/claude-code HTTP/1.1\r\nHost: 127.0.0.1:{daemon.port}\r\n"
                 f"X-Agent-Collector-Token: {token}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += conn.recv(4096)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
    return conn


def test_idle_keep_alive_connections_make_room_for_new_ones(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path).start()
    idle: list[socket.socket] = []
    try:
        idle = [keep_alive_post(daemon, hook(i)) for i in range(IDLE)]  # every slot taken, all idle
        for i in range(IDLE, IDLE + 20):  # each new one (kept open too) closes the longest idle, none gets 503
            idle.append(keep_alive_post(daemon, hook(i)))
        status = daemon.get("/v1/status")
        entries = daemon.wait_output(lambda es: len({e["gen_ai.tool.call.id"] for e in es
                                                     if e["event.name"] == "tool.call"}) >= IDLE + 20)
    finally:
        for conn in idle:
            conn.close()
        assert daemon.stop() == 0
    assert_no_duplicates(entries)
    calls = sorted(e["gen_ai.tool.call.id"] for e in entries if e["event.name"] == "tool.call")
    assert calls == [f"toolu_{i:06d}" for i in range(IDLE + 20)], "every hook exactly once"
    requests = status["ingest"]["requests"]
    assert requests["idle_closed"] >= 20 and "rejected_too_many_connections" not in requests


def test_half_open_connections_without_a_token_do_not_lock_clients_out(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path).start()
    half_open: list[socket.socket] = []
    posted: list[socket.socket] = []
    try:
        for _ in range(200):  # a request line and half a header, then silence: no token shown
            conn = socket.create_connection(("127.0.0.1", daemon.port), timeout=10)
            conn.sendall(b"POST /v1/hooks/claude-code HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            half_open.append(conn)
        posted = [keep_alive_post(daemon, hook(i)) for i in range(20)]  # each got a 200, none a 503
        status = daemon.get("/v1/status")
        entries = daemon.wait_output(lambda es: len({e["gen_ai.tool.call.id"] for e in es
                                                     if e["event.name"] == "tool.call"}) >= 20)
    finally:
        for conn in half_open + posted:
            conn.close()
        assert daemon.stop() == 0
    assert_no_duplicates(entries)
    calls = sorted(e["gen_ai.tool.call.id"] for e in entries if e["event.name"] == "tool.call")
    assert calls == [f"toolu_{i:06d}" for i in range(20)], "every hook exactly once"
    requests = status["ingest"]["requests"]
    assert requests["unauthenticated_closed"] >= 200 - IDLE, requests  # then the posted, idle ones went first
    assert "rejected_too_many_connections" not in requests and "rejected_bad_request" not in requests
