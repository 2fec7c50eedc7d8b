"""Turn grouping, a step of the pipeline: every entry is told which user turn it belongs to.

A turn begins at ``user.prompt`` and ends at the next prompt of the session, at ``session.end``, or at a
``session.status`` of ready_for_review/closed/error. Entries that name their turn (``gen_ai.turn.id``)
belong to it; others to the session's current turn (an entry before any prompt opens a turn keyed by its
own ``event.id``). Two fields carry this in the output (schemas/activity-event.schema.json):

- ``turn.key``: the turn the entry belongs to (the prompt's turn id, or the entry that opened the turn);
- ``turn.ends``: on the entry that ends turns, the keys it ends (a new prompt ends the previous turn;
  ``session.end`` every turn of the session still open).

Entries that only describe the session (``session.start``/``session.status``/``session.end``) outside any
turn get no ``turn.key``. A turn that simply goes quiet has no end entry: consumers decide what idle means
(the trace exporter sends it after ``turn_idle_timeout``). No I/O and no clock: each session's state (its
current, open and recently ended turns) is kept like the correlator's
(:class:`~collector.pipeline.session_cache.SessionCache`): the most recently used sessions in memory, what
changed handed out by :meth:`TurnMarker.changes` for the next checkpoint commit, a session that left
memory loaded back through ``load``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from collector.pipeline.session_cache import SessionCache

Entry = dict[str, Any]
KEY = "turn.key"
ENDS = "turn.ends"
SESSION_ONLY = frozenset({"session.start", "session.end", "session.status"})
RECENT_ENDED = 16  # ended turns remembered per session
ENDING_STATUSES = frozenset({"ready_for_review", "closed", "error"})


def ends_its_turn(entry: Mapping[str, Any]) -> bool:
    """Entries that end the turn they belong to (besides the next prompt)."""
    name = entry.get("event.name")
    if name == "session.end":
        return True
    return name == "session.status" and entry.get("session.status") in ENDING_STATUSES


class _Turns:
    """One session's turns: the current one, those still open, the last ones ended."""

    __slots__ = ("current", "open", "ended")

    def __init__(self, current: str | None = None, open_keys: list[str] | None = None,
                 ended: list[str] | None = None) -> None:
        self.current = current
        self.open = open_keys if open_keys is not None else []
        self.ended = ended if ended is not None else []  # a straggler does not reopen one of these

    def encode(self) -> list[Any]:
        return [self.current, self.open, self.ended]


class TurnMarker:
    """Sets ``turn.key`` / ``turn.ends`` on entries in arrival order (see module docstring).

    ``state``: what :meth:`state` returned (all sessions in one value; also an older version's checkpoint),
    taken back; ``load``: one saved session by key (``agent\\x1fsession``, the checkpoint store's), None when
    there is none. Without ``load`` a session that leaves memory is forgotten."""

    def __init__(self, state: Mapping[str, Any] | None = None, max_sessions: int = 5000,
                 load: Callable[[str], Any] | None = None) -> None:
        self.max_sessions = max_sessions
        self._sessions: SessionCache[_Turns] = SessionCache(
            max_sessions, None if load is None else lambda key: _decode(load(key)), keep_evicted=load is not None)
        for agent, session, key, open_keys, *ended in (state or {}).get("sessions", []):
            self._sessions.put(f"{agent}\x1f{session}",
                               _Turns(key, list(open_keys or []), list(ended[0]) if ended and ended[0] else []))

    def apply(self, entry: Entry) -> None:
        skey = f"{entry.get('gen_ai.agent.type') or ''}\x1f{entry.get('gen_ai.session.id') or ''}"
        turns = self._sessions.get(skey)
        if turns is None:
            turns = _Turns()
            self._sessions.put(skey, turns)
        key, ends = self._key(entry, turns)
        ended = turns.ended
        if key is not None:
            entry[KEY] = key
            if key not in turns.open and key not in ended:
                turns.open.append(key)
        if entry.get("event.name") == "session.end":
            ends += turns.open
            turns.open = []
        elif key is not None and ends_its_turn(entry):
            ends.append(key)
        if not ends:
            return
        ends = sorted({k for k in ends if k not in ended})
        for done in ends:
            if done in turns.open:
                turns.open.remove(done)
            ended.append(done)
        del ended[:-RECENT_ENDED]
        if ends:
            entry[ENDS] = ends

    @staticmethod
    def _key(entry: Entry, turns: _Turns) -> tuple[str | None, list[str]]:
        name = entry.get("event.name")
        turn_id = entry.get("gen_ai.turn.id")
        if name == "user.prompt":
            key = str(turn_id or entry.get("event.id") or "")
            previous = turns.current
            turns.current = key
            if previous is not None and previous != key and previous in turns.open:
                return key, [previous]
            return key, []
        if turn_id:
            return str(turn_id), []
        if turns.current is not None:
            return turns.current, []
        if name in SESSION_ONLY:
            return None, []
        turns.current = str(entry.get("event.id") or "")
        return turns.current, []

    def state(self) -> dict[str, Any]:
        """The sessions in memory, as JSON (the trace exporter keeps its own marker's this way)."""
        return {"sessions": [[*key.split("\x1f", 1), *t.encode()] for key, t in self._sessions.items()]}

    def changes(self) -> list[tuple[str, list[Any]]]:
        """(key, state) of every session changed since the last call, to be saved."""
        return [(key, t.encode()) for key, t in self._sessions.drain()]


def _decode(raw: Any) -> _Turns | None:
    if not isinstance(raw, list) or len(raw) != 3:
        return None
    current, open_keys, ended = raw
    return _Turns(current, list(open_keys or []), list(ended or []))
