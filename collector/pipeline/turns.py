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
(the trace exporter sends it after ``turn_idle_timeout``). Pure state, no I/O and no clock; the state
(each session's current and open turns) is saved with every checkpoint commit.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

Entry = dict[str, Any]
SessionKey = tuple[str, str]  # agent, session id
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


class TurnMarker:
    """Sets ``turn.key`` / ``turn.ends`` on entries in arrival order (see module docstring)."""

    def __init__(self, state: Mapping[str, Any] | None = None, max_sessions: int = 5000) -> None:
        self.max_sessions = max_sessions
        self.current: OrderedDict[SessionKey, str] = OrderedDict()
        self.open: dict[SessionKey, list[str]] = {}
        self.ended: dict[SessionKey, list[str]] = {}  # the last turns ended: a straggler does not reopen one
        for agent, session, key, open_keys, *ended in (state or {}).get("sessions", []):
            if key is not None:
                self.current[(agent, session)] = key
            if open_keys:
                self.open[(agent, session)] = list(open_keys)
            if ended and ended[0]:
                self.ended[(agent, session)] = list(ended[0])

    def apply(self, entry: Entry) -> None:
        skey = (str(entry.get("gen_ai.agent.type") or ""), str(entry.get("gen_ai.session.id") or ""))
        key, ends = self._key(entry, skey)
        if key is not None:
            entry[KEY] = key
            open_keys = self.open.setdefault(skey, [])
            if key not in open_keys and key not in self.ended.get(skey, ()):
                open_keys.append(key)
        if entry.get("event.name") == "session.end":
            ends += self.open.pop(skey, [])
        elif key is not None and ends_its_turn(entry):
            ends.append(key)
        ends = sorted({k for k in ends if k not in self.ended.get(skey, ())})
        for ended in ends:
            if ended in self.open.get(skey, ()):
                self.open[skey].remove(ended)
            recent = self.ended.setdefault(skey, [])
            recent.append(ended)
            del recent[:-RECENT_ENDED]
        if ends:
            entry[ENDS] = ends
        self._evict()

    def _key(self, entry: Entry, skey: SessionKey) -> tuple[str | None, list[str]]:
        name = entry.get("event.name")
        turn_id = entry.get("gen_ai.turn.id")
        event_id = str(entry.get("event.id") or "")
        if name == "user.prompt":
            key = str(turn_id or event_id)
            previous = self.current.get(skey)
            self._set_current(skey, key)
            if previous is not None and previous != key and previous in self.open.get(skey, ()):
                return key, [previous]
            return key, []
        if turn_id:
            return str(turn_id), []
        current = self.current.get(skey)
        if current is not None:
            self.current.move_to_end(skey)
            return current, []
        if name in SESSION_ONLY:
            return None, []
        self._set_current(skey, event_id)
        return event_id, []

    def _set_current(self, skey: SessionKey, key: str) -> None:
        self.current[skey] = key
        self.current.move_to_end(skey)

    def _evict(self) -> None:
        while len(self.current) > self.max_sessions:
            skey, _ = self.current.popitem(last=False)
            self.open.pop(skey, None)
        for table in (self.open, self.ended):
            while len(table) > self.max_sessions:
                table.pop(next(iter(table)))

    def state(self) -> dict[str, Any]:
        keys = list(dict.fromkeys([*self.current, *self.open, *self.ended]))
        return {"sessions": [[a, s, self.current.get((a, s)), self.open.get((a, s), []), self.ended.get((a, s), [])]
                             for a, s in keys]}
