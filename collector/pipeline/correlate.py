"""Correlation across records: turns, tool-call pairing, model-call latency.

Sources deliver in whatever order they are read (all hooks, then all transcripts, in a backfill), so
turns are assigned by time, not by arrival: an entry belongs to the latest prompt of its session at or
before its own time. The state is small, bounded, and saved with the checkpoints.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

MAX_TURNS = 500
MAX_CALLS = 2000
MAX_SESSIONS = 2000
_UNTURNED = {"session.start", "session.end", "session.status"}


@dataclass(slots=True)
class _Session:
    turn_times: list[int] = field(default_factory=list)
    turn_ids: list[str] = field(default_factory=list)
    tools: dict[str, list[Any]] = field(default_factory=dict)  # call id -> [name, time_ns]
    requests: dict[str, int] = field(default_factory=dict)  # request id -> time_ns
    last_ns: int = 0


class Correlator:
    def __init__(self, state: dict[str, Any] | None = None) -> None:
        self._sessions: dict[str, _Session] = {}
        for key, raw in (state or {}).items():
            self._sessions[key] = _Session(
                raw.get("turn_times", []), raw.get("turn_ids", []), raw.get("tools", {}), raw.get("requests", {}),
                raw.get("last_ns", 0),
            )

    def state(self) -> dict[str, Any]:
        return {
            key: {"turn_times": s.turn_times, "turn_ids": s.turn_ids, "tools": s.tools, "requests": s.requests,
                  "last_ns": s.last_ns}
            for key, s in self._sessions.items()
        }

    def apply(self, entry: dict[str, Any]) -> None:
        session_id = entry.get("gen_ai.session.id")
        if not session_id:
            return
        key = f"{entry['gen_ai.agent.type']}\x1f{session_id}"
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = _Session()
            self._evict()
        time_ns = entry["time_unix_nano"]
        session.last_ns = max(session.last_ns, time_ns)
        name = entry["event.name"]
        if name == "user.prompt" and entry.get("gen_ai.turn.id"):
            self._add_turn(session, time_ns, entry["gen_ai.turn.id"])
        elif name not in _UNTURNED and not entry.get("gen_ai.turn.id"):
            turn = self._turn_at(session, time_ns)
            if turn:
                entry["gen_ai.turn.id"] = turn
        self._pair(session, name, entry, time_ns)

    @staticmethod
    def _add_turn(session: _Session, time_ns: int, turn_id: str) -> None:
        if turn_id in session.turn_ids:
            return
        index = bisect.bisect_right(session.turn_times, time_ns)
        session.turn_times.insert(index, time_ns)
        session.turn_ids.insert(index, turn_id)
        if len(session.turn_ids) > MAX_TURNS:
            del session.turn_times[0], session.turn_ids[0]

    @staticmethod
    def _turn_at(session: _Session, time_ns: int) -> str | None:
        index = bisect.bisect_right(session.turn_times, time_ns)
        return session.turn_ids[index - 1] if index else None

    @staticmethod
    def _pair(session: _Session, name: str, entry: dict[str, Any], time_ns: int) -> None:
        call_id = entry.get("gen_ai.tool.call.id")
        if name == "tool.call" and call_id:
            session.tools[call_id] = [entry.get("gen_ai.tool.name"), time_ns]
            _trim(session.tools, MAX_CALLS)
        elif name == "tool.result" and call_id and call_id in session.tools:
            tool_name, started = session.tools[call_id]
            if not entry.get("gen_ai.tool.name") and tool_name:
                entry["gen_ai.tool.name"] = tool_name
            if entry.get("duration_ms") is None and time_ns > started:
                entry["duration_ms"] = (time_ns - started) // 1_000_000
        request_id = entry.get("gen_ai.request.id")
        if name == "llm.request" and request_id:
            session.requests[request_id] = time_ns
            _trim(session.requests, MAX_CALLS)
        elif name == "llm.response" and request_id in session.requests and entry.get("duration_ms") is None:
            started_ns = session.requests[request_id]
            if time_ns > started_ns:
                entry["duration_ms"] = (time_ns - started_ns) // 1_000_000

    def _evict(self) -> None:
        if len(self._sessions) > MAX_SESSIONS:
            oldest = min(self._sessions, key=lambda k: self._sessions[k].last_ns)
            del self._sessions[oldest]


def _trim(mapping: dict[str, Any], limit: int) -> None:
    while len(mapping) > limit:
        del mapping[next(iter(mapping))]
