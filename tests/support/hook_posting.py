"""Posting hooks to the daemon's ingest the way the agents do, shared by the crash test
(tests/ingest/test_ingest_durability.py) and the latency benchmark (benchmarks/hook_latency_backfill.py).

:class:`HookClient` posts one hook (a new connection each, as Claude Code does, or kept alive);
:func:`post_hooks` is the loop: it posts a sequence of hooks, reports each answer (or failure) to a
callback and survives the daemon going away (a refused connection is retried with the same hook,
because nothing was sent; any other failure gives that hook up, as an agent would)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

TOKEN_HEADER = "X-Agent-Collector-Token"


def pre_tool_use(session: str, tool_use_id: str, command: str = "true") -> bytes:
    """A Claude Code PreToolUse hook body (one tool call in the output, keyed by ``tool_use_id``)."""
    return json.dumps({"session_id": session, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                       "tool_use_id": tool_use_id, "tool_input": {"command": command}}).encode()


@dataclass
class HookClient:
    port: int
    token: str
    agent: str = "claude-code"
    keep_alive: bool = True
    timeout: float = 10.0
    _conn: http.client.HTTPConnection | None = field(default=None, init=False, repr=False)

    def post(self, body: bytes) -> tuple[int, float]:
        """Post one hook body; (HTTP status, milliseconds until the answer was read). Raises OSError /
        HTTPException when the daemon is not there or went away (the connection is dropped then)."""
        started = time.perf_counter()
        conn = self._conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        self._conn = conn if self.keep_alive else None
        try:
            conn.request("POST", f"/v1/hooks/{self.agent}", body,
                         {"Content-Type": "application/json", TOKEN_HEADER: self.token})
            response = conn.getresponse()
            response.read()
        except BaseException:
            self.close(conn)
            raise
        if not self.keep_alive or response.will_close:
            self.close(conn)
        return response.status, (time.perf_counter() - started) * 1000

    def close(self, conn: http.client.HTTPConnection | None = None) -> None:
        target = conn or self._conn
        if target is not None:
            target.close()
        if self._conn is target:
            self._conn = None


Answer = Callable[[str, int | None, float], None]  # (key, status or None when it failed, ms)


def post_hooks(client: HookClient, hooks: Iterable[tuple[str, bytes]], on_answer: Answer,
               stop: threading.Event | None = None, pause_s: float = 0.0, refused_for_s: float = 60.0) -> None:
    """Post every ``(key, body)`` of ``hooks`` in order, ``pause_s`` apart, calling ``on_answer`` once per
    hook. While the daemon is down (connection refused: nothing was sent) the same hook is tried again
    every 20 ms until ``stop`` is set (ConnectionRefusedError after ``refused_for_s`` of refusals); after
    any other failure (the daemon died with the request in flight) the hook is reported with status None
    and the loop goes on with the next one."""
    for key, body in hooks:
        refused_since: float | None = None
        while True:
            if stop is not None and stop.is_set():
                return
            try:
                status, ms = client.post(body)
            except ConnectionRefusedError:
                refused_since = refused_since or time.monotonic()
                if time.monotonic() - refused_since > refused_for_s:
                    raise
                time.sleep(0.02)
                continue
            except (OSError, http.client.HTTPException):
                on_answer(key, None, 0.0)
                break
            on_answer(key, status, ms)
            break
        if pause_s:
            time.sleep(pause_s)
