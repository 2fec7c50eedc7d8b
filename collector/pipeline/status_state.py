"""What the status tracker knows of one session, and its saved form.

A session's state is a *base* status (what the last lifecycle event said) plus a set of open *waits*,
each keyed by the identity of the thing that waits; :meth:`SessionState.visible` is the status shown. The
state is saved with the checkpoints as plain JSON (:func:`dump_state`, :func:`decode_state`), so the idle
rule and the live status survive a restart and an eviction.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

IDLE = "idle"
RUNNING = "running"
WAITING = "waiting_for_input"
READY = "ready_for_review"
CLOSED = "closed"
ERROR = "error"
STATUSES = (IDLE, RUNNING, WAITING, READY, CLOSED, ERROR)

_MAX_COUNTED_IDS = 4096  # tool call / event ids remembered per session so replays do not count twice


@dataclass(slots=True)
class Wait:
    """An open wait: a permission request, a question to the user, an elicitation or a notification."""

    kind: str
    since_ns: int
    tool_name: str | None = None

    def to_dict(self, key: str) -> dict[str, Any]:
        out: dict[str, Any] = {"key": key, "kind": self.kind, "since_unix_nano": self.since_ns}
        if self.tool_name:
            out["tool_name"] = self.tool_name
        return out


class _BoundedSet:
    """Remembers the last ``cap`` keys (for dedupe of counters)."""

    def __init__(self, cap: int) -> None:
        self._items: OrderedDict[str, None] = OrderedDict()
        self._cap = cap

    def add(self, key: str) -> bool:
        """True if ``key`` is new."""
        if key in self._items:
            return False
        self._items[key] = None
        if len(self._items) > self._cap:
            self._items.popitem(last=False)
        return True


@dataclass(slots=True)
class Counters:
    """A session's counts for one local day (the live picture shows today's)."""

    day: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    errors: int = 0


@dataclass(slots=True)
class SessionState:
    """One session as the tracker knows it: its base status, open waits, activity and today's counters."""

    agent: str
    session_id: str
    base: str | None = None
    status: str | None = None
    status_since_ns: int = 0
    last_event_ns: int = 0
    last_signal_ns: int = 0
    last_hook_event: str | None = None
    workspace: str | None = None
    model: str | None = None
    waits: dict[str, Wait] = field(default_factory=dict)
    recent_tools: OrderedDict[str, str] = field(default_factory=OrderedDict)  # fingerprint -> call id
    counters: Counters = field(default_factory=Counters)
    counted: _BoundedSet = field(default_factory=lambda: _BoundedSet(_MAX_COUNTED_IDS))

    def visible(self) -> str | None:
        if self.base == CLOSED:
            return CLOSED
        if self.waits:
            return WAITING
        return self.base


_STATE_FIELDS = ("agent", "session_id", "base", "status", "status_since_ns", "last_event_ns", "last_signal_ns",
                 "last_hook_event", "workspace", "model")


def dump_state(state: SessionState) -> dict[str, Any]:
    """The state as JSON, as it is saved (and shown by ``open_sessions``)."""
    out: dict[str, Any] = {k: getattr(state, k) for k in _STATE_FIELDS}
    out["waits"] = {k: [w.kind, w.since_ns, w.tool_name] for k, w in state.waits.items()}
    out["recent_tools"] = list(state.recent_tools.items())
    c = state.counters
    out["counters"] = [c.day, c.input_tokens, c.output_tokens, c.tool_calls, c.errors]
    return out


def session_key(agent: str, session_id: str) -> str:
    """The key a session is held and saved under."""
    return f"{agent}\x1f{session_id}"


def decode_state(raw: Any) -> SessionState | None:
    """The state a saved one gives; None when it cannot be read (it is skipped)."""
    try:
        return _load_state(raw)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _load_state(raw: Mapping[str, Any]) -> SessionState:
    state = SessionState(**{k: raw[k] for k in _STATE_FIELDS})
    if not (isinstance(state.agent, str) and isinstance(state.session_id, str)):
        raise TypeError("agent and session id must be strings")
    for key, (kind, since, tool) in dict(raw.get("waits") or {}).items():
        state.waits[str(key)] = Wait(str(kind), int(since), tool)
    state.recent_tools.update((str(k), str(v)) for k, v in raw.get("recent_tools") or [])
    day, tokens_in, tokens_out, tools, errors = raw.get("counters") or ["", 0, 0, 0, 0]
    state.counters = Counters(str(day), int(tokens_in), int(tokens_out), int(tools), int(errors))
    return state

