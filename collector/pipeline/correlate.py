"""Correlation across records: turns, tool-call pairing, model-call latency.

Sources deliver in whatever order they are read (all hooks, then all transcripts, in a backfill), so
turns are assigned by time, not by arrival: an entry belongs to the latest prompt of its session at or
before its own time. The state of each session is small and bounded; the most recently used sessions are
kept in memory (:class:`~collector.pipeline.session_cache.SessionCache`), every other one in the checkpoint
store (:meth:`Correlator.changes` hands out what to save with the next commit; ``load`` reads it back).

Sub-sessions: an agent that runs a sub-agent as a session of its own (a child session) says so
in that session's ``session.start`` (``gen_ai.session.parent.id``). From then on the child's entries are
reported as the sub-agent's, in the parent session: ``gen_ai.session.id`` becomes the parent's,
``gen_ai.agent.id`` the child's id, ``gen_ai.agent.scope`` subagent, the turn the parent's turn at that
time, the child's prompt (the task the parent gave) becomes ``subagent.start``, and the link to the
tool call that started it comes as for any sub-agent (the start names it, or the oldest agent-type call
still launching). The child's own session.start/status/end stay in its session. Event ids are not
touched (they were made from the child's id), so hooks and files still dedupe.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collector.model import AgentActivityEntry, event_id
from collector.pipeline.session_cache import SessionCache

MAX_TURNS = 500
MAX_CALLS = 2000
MAX_SESSIONS = 2000
_UNTURNED = {"session.start", "session.end", "session.status"}
# the entries each step looks at (the others pass it untouched)
_PAIRED = frozenset({"tool.call", "tool.result", "llm.request", "llm.response"})
_TRACKED = frozenset({"tool.call", "tool.result", "session.end"})
_CALLS = frozenset({"tool.call", "tool.result"})


@dataclass(slots=True)
class _Session:
    turn_times: list[int] = field(default_factory=list)
    turn_ids: list[str] = field(default_factory=list)
    tools: dict[str, list[Any]] = field(default_factory=dict)  # call id -> [name, time_ns]
    requests: dict[str, int] = field(default_factory=dict)  # request id -> time_ns
    last_ns: int = 0
    subagents: dict[str, str] = field(default_factory=dict)  # subagent id -> the tool call that started it
    launching: list[str] = field(default_factory=list)  # agent-type tool calls not yet tied to a subagent
    closed: list[str] = field(default_factory=list)  # calls that have a result (a late copy opens nothing)
    open_calls: dict[str, list[Any]] = field(default_factory=dict)  # call id -> [name, time, turn, agent, scope]
    ended_ns: int = 0  # the session ended (session.end) at this time; its open calls close at the cycle's end
    parent: str = ""  # a sub-session: the session its entries are reported in (see the module docstring)


class Correlator:
    """``state``: sessions saved by an older version (all in one value), taken back; ``load``: one saved
    session by key (the checkpoint store's), None when there is none."""

    def __init__(self, state: dict[str, Any] | None = None, load: Callable[[str], Any] | None = None,
                 max_sessions: int = MAX_SESSIONS) -> None:
        self._sessions: SessionCache[_Session] = SessionCache(max_sessions, None if load is None else
                                                              lambda key: _decode(load(key)))
        self._ended: set[str] = set()  # sessions that ended since the last close_interrupted
        for key, raw in (state or {}).items():
            session = _decode(raw)
            if session is not None:
                self._sessions.put(key, session)

    def state(self) -> dict[str, Any]:
        """The sessions in memory, as JSON."""
        return {key: _encode(s) for key, s in self._sessions.items()}

    def changes(self) -> list[tuple[str, dict[str, Any], int]]:
        """(key, state, last activity) of every session changed since the last call, to be saved."""
        return [(key, _encode(s), s.last_ns) for key, s in self._sessions.drain()]

    def apply(self, entry: dict[str, Any]) -> None:
        session_id = entry.get("gen_ai.session.id")
        if not session_id:
            return
        key = f"{entry['gen_ai.agent.type']}\x1f{session_id}"
        session = self._session(key)
        name = entry["event.name"]
        if name == "session.start" and entry.get("gen_ai.session.parent.id"):
            self._adopt(entry, session)
        elif session.parent and name not in _UNTURNED:
            key, session = self._fold(entry, session)
        time_ns = entry["time_unix_nano"]
        session.last_ns = max(session.last_ns, time_ns)
        name = entry["event.name"]
        if name == "user.prompt" and entry.get("gen_ai.turn.id"):
            self._add_turn(session, time_ns, entry["gen_ai.turn.id"])
        elif name not in _UNTURNED and not entry.get("gen_ai.turn.id"):
            turn = self._turn_at(session, time_ns)
            if turn:
                entry["gen_ai.turn.id"] = turn
        if name in _PAIRED:
            self._pair(session, name, entry, time_ns)
        if name in _TRACKED and self._track_open(session, name, entry, time_ns):
            self._ended.add(key)
        if name in _CALLS or entry.get("gen_ai.agent.scope") == "subagent":
            self._link_subagent(session, name, entry)

    def _session(self, key: str) -> _Session:
        session = self._sessions.get(key)
        if session is None:
            session = _Session()
            self._sessions.put(key, session)
        return session

    def _adopt(self, entry: dict[str, Any], child: _Session) -> None:
        """A sub-session starts: its parent learns which call started it (named, or the oldest launching)."""
        child_id, parent_id = entry["gen_ai.session.id"], str(entry["gen_ai.session.parent.id"])
        child.parent = parent_id
        parent = self._session(f"{entry['gen_ai.agent.type']}\x1f{parent_id}")
        call = entry.get("gen_ai.subagent.parent_tool_call.id") or parent.subagents.get(child_id)
        if not call and parent.launching:
            call = parent.launching.pop(0)
        if call:
            parent.subagents[child_id] = str(call)
            _trim(parent.subagents, MAX_CALLS)
            entry["gen_ai.subagent.parent_tool_call.id"] = call
            if call in parent.launching:
                parent.launching.remove(call)

    def _fold(self, entry: dict[str, Any], child: _Session) -> tuple[str, _Session]:
        """An entry of a sub-session, reported as its sub-agent's in the parent session."""
        child_id = entry["gen_ai.session.id"]
        key = f"{entry['gen_ai.agent.type']}\x1f{child.parent}"
        parent = self._session(key)
        entry["gen_ai.session.id"] = child.parent
        entry["gen_ai.agent.id"] = child_id
        entry["gen_ai.agent.scope"] = "subagent"
        if entry["event.name"] == "user.prompt":
            entry["event.name"] = "subagent.start"
        turn = self._turn_at(parent, entry["time_unix_nano"])
        if turn:
            entry["gen_ai.turn.id"] = turn
        else:
            entry.pop("gen_ai.turn.id", None)
        return key, parent

    @staticmethod
    def _track_open(session: _Session, name: str, entry: dict[str, Any], time_ns: int) -> bool:
        """Keep the calls without a result; True when this entry ends the session."""
        call_id = entry.get("gen_ai.tool.call.id")
        if name == "tool.call" and call_id and call_id not in session.closed:
            session.open_calls[call_id] = [entry.get("gen_ai.tool.name"), time_ns, entry.get("gen_ai.turn.id"),
                                           entry.get("gen_ai.agent.id"), entry.get("gen_ai.agent.scope")]
            _trim(session.open_calls, MAX_CALLS)
        elif name == "tool.result" and call_id:
            session.open_calls.pop(call_id, None)
            session.closed.append(call_id)
            del session.closed[:-MAX_CALLS]
        elif name == "session.end":
            session.ended_ns = max(session.ended_ns, time_ns)
            return True
        return False

    def close_interrupted(self, observed_ns: int) -> list[dict[str, Any]]:
        """A tool.result (cancelled, ``error.type`` interrupted) for every call of an ended session that
        never got one: the agent was killed while the tool ran, or wrote nothing more. Called once every
        source has been read (the end of a cycle), so a result still to come from another input of the
        same cycle is not pre-empted; the id is the one a real result would have."""
        out = []
        for key in sorted(self._ended):
            session = self._sessions.get(key)
            if session is None or not session.ended_ns:
                continue
            agent, session_id = key.split("\x1f", 1)
            for call_id, (tool, started, turn, agent_id, scope) in list(session.open_calls.items()):
                if started <= session.ended_ns:
                    out.append(_interrupted_result(agent, session_id, call_id, tool, turn, agent_id, scope,
                                                   session.ended_ns, observed_ns))
                    del session.open_calls[call_id]
            session.ended_ns = 0
        self._ended.clear()
        return out

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

    @staticmethod
    def _link_subagent(session: _Session, name: str, entry: dict[str, Any]) -> None:
        """Tie a subagent to the tool call that started it: the call's result names the subagent when the
        agent says so; otherwise a subagent.start takes the oldest agent-type call still launching."""
        call_id = entry.get("gen_ai.tool.call.id")
        if name == "tool.call" and entry.get("gen_ai.tool.type") == "agent" and call_id:
            if call_id not in session.launching and call_id not in session.subagents.values():
                session.launching.append(call_id)
                del session.launching[:-MAX_TURNS]
        elif name == "tool.result" and entry.get("gen_ai.subagent.id") and call_id:
            session.subagents[entry["gen_ai.subagent.id"]] = call_id
            if call_id in session.launching:
                session.launching.remove(call_id)
        agent_id = entry.get("gen_ai.agent.id")
        if not agent_id or entry.get("gen_ai.agent.scope") != "subagent":
            return
        if agent_id not in session.subagents and name == "subagent.start" and session.launching:
            session.subagents[agent_id] = session.launching.pop(0)
            _trim(session.subagents, MAX_CALLS)
        parent = session.subagents.get(agent_id)
        if parent and not entry.get("gen_ai.subagent.parent_tool_call.id"):
            entry["gen_ai.subagent.parent_tool_call.id"] = parent



_FIELDS = ("turn_times", "turn_ids", "tools", "requests", "last_ns", "subagents", "launching", "closed",
           "open_calls", "ended_ns", "parent")


def _interrupted_result(agent: str, session_id: str, call_id: str, tool: Any, turn: Any, agent_id: Any,
                        scope: Any, end_ns: int, observed_ns: int) -> dict[str, Any]:
    entry = AgentActivityEntry(
        name="tool.result", agent=agent, time_ns=end_ns, observed_ns=observed_ns,
        id=event_id(agent, session_id, "tool.result", call_id), session_id=session_id,
        attributes={"source.kind": "collector", "gen_ai.tool.call.id": call_id, "gen_ai.tool.name": tool,
                    "gen_ai.turn.id": turn, "gen_ai.agent.id": agent_id, "gen_ai.agent.scope": scope,
                    "tool.result.status": "cancelled", "error.type": "interrupted",
                    "error.message": "the session ended before the tool returned a result"},
    )
    return entry.to_dict()


def _encode(session: _Session) -> dict[str, Any]:
    return {k: getattr(session, k) for k in _FIELDS}


def _decode(raw: Any) -> _Session | None:
    if not isinstance(raw, dict):
        return None
    try:
        return _Session(**{k: raw[k] for k in _FIELDS if k in raw})
    except TypeError:
        return None


def _trim(mapping: dict[str, Any], limit: int) -> None:
    while len(mapping) > limit:
        del mapping[next(iter(mapping))]
