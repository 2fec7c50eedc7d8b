"""Collect each turn's entries until the turn can be sent as a trace. Pure state, no I/O; JSON-serialisable.

Which turn an entry belongs to, and which entries end a turn, is decided by the pipeline's turn step
(``collector.pipeline.turns``: the ``turn.key`` and ``turn.ends`` fields); here a turn only waits until it
is sent: ``grace_ns`` after the entry that ended it (for stragglers, e.g. a transcript line read after the
hook that ended the turn), or after ``idle_ns`` without new entries (then it is sent marked incomplete).
Entries for a turn already released come back as a *late* unit (spans without a new root, parented by the
deterministic root id). Entries that did not pass the pipeline (direct use, queues written by an older
version) are marked here by the same ``TurnMarker``.

Those two waits are the daemon's, in wall-clock time since the entries arrived. When the input has ended
(``collect --once`` read everything there is), :meth:`TurnAssembler.end_of_input` judges by the input
itself: a turn something ended is sent at once, and a turn whose last entry's own time
(``time_unix_nano``) is ``idle_ns`` or more before now is sent marked incomplete; a turn still recent by
its entries' time stays open for the next run (or the daemon).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from collector.exporters.trace_builder import TurnInput
from collector.pipeline.turns import ENDS, KEY, TurnMarker

Entry = dict[str, Any]
TurnKey = tuple[str, str, str]  # agent, session, turn key


@dataclass(slots=True)
class OpenTurn:
    agent: str
    session: str
    key: str
    entries: list[Entry] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    last_arrival_ns: int = 0
    last_event_ns: int = 0  # the latest time_unix_nano of its entries
    ending_since_ns: int | None = None


@dataclass(slots=True)
class ClosedTurn:
    ids: set[str] = field(default_factory=set)
    span_ids: set[str] = field(default_factory=set)


class TurnAssembler:
    def __init__(self, idle_ns: int, grace_ns: int = 0, max_closed: int = 256) -> None:
        self.idle_ns = idle_ns
        self.grace_ns = grace_ns
        self.max_closed = max_closed
        self.open: dict[TurnKey, OpenTurn] = {}
        self.marker = TurnMarker()  # only for entries the pipeline did not mark
        self.closed: OrderedDict[TurnKey, ClosedTurn] = OrderedDict()
        self.late: dict[TurnKey, list[Entry]] = {}
        self.duplicates = 0
        self.late_entries = 0

    # -- intake -----------------------------------------------------------------------------------------
    def add(self, entry: Entry, now_ns: int) -> None:
        if KEY not in entry and ENDS not in entry:
            entry = dict(entry)
            self.marker.apply(entry)
        agent = str(entry.get("gen_ai.agent.type") or "")
        session = str(entry.get("gen_ai.session.id") or "")
        key = entry.get(KEY)
        if key is not None:
            self._take(entry, (agent, session, str(key)), now_ns)
        for ended in entry.get(ENDS) or []:
            self._end((agent, session, str(ended)), now_ns)

    def _take(self, entry: Entry, tkey: TurnKey, now_ns: int) -> None:
        event_id = str(entry.get("event.id") or "")
        closed = self.closed.get(tkey)
        if closed is not None:
            if event_id in closed.ids:
                self.duplicates += 1
            else:
                closed.ids.add(event_id)
                self.late.setdefault(tkey, []).append(entry)
                self.late_entries += 1
            return
        turn = self.open.get(tkey)
        if turn is None:
            turn = self.open[tkey] = OpenTurn(*tkey)
        if event_id in turn.ids:
            self.duplicates += 1
            return
        turn.entries.append(entry)
        turn.ids.add(event_id)
        turn.last_arrival_ns = now_ns
        turn.last_event_ns = max(turn.last_event_ns, _event_ns(entry))

    def _end(self, tkey: TurnKey, now_ns: int) -> None:
        turn = self.open.get(tkey)
        if turn is not None and turn.ending_since_ns is None:
            turn.ending_since_ns = now_ns

    # -- release ----------------------------------------------------------------------------------------
    def due(self, now_ns: int) -> list[TurnInput]:
        """Turns ready to be sent (ended + grace, or idle since they last got an entry), and late entries;
        they leave the open set. The daemon's rule: wall-clock time since arrival."""
        return self._release(lambda turn: _live_state(turn, now_ns, self.grace_ns, self.idle_ns))

    def end_of_input(self, now_ns: int) -> list[TurnInput]:
        """The input has ended (``collect --once``): every ended turn, and every turn whose last entry's
        own time is ``idle_ns`` or more before ``now_ns`` (incomplete), and late entries."""
        def state(turn: OpenTurn) -> bool | None:
            if turn.ending_since_ns is not None:
                return True
            return False if now_ns - turn.last_event_ns >= self.idle_ns else None

        return self._release(state)

    def _release(self, state: Callable[[OpenTurn], bool | None]) -> list[TurnInput]:
        """``state``: True (ended: send complete), False (idle: send incomplete), None (keep open)."""
        out: list[TurnInput] = []
        for tkey, turn in list(self.open.items()):
            complete = state(turn)
            if complete is None:
                continue
            del self.open[tkey]
            self.closed[tkey] = ClosedTurn(ids=set(turn.ids))
            out.append(TurnInput(turn.agent, turn.session, turn.key, turn.entries, complete=complete))
        for tkey, entries in self.late.items():
            out.append(TurnInput(tkey[0], tkey[1], tkey[2], entries, complete=True, include_root=False))
        self.late = {}
        while len(self.closed) > self.max_closed:
            self.closed.popitem(last=False)
        return out

    def record_sent(self, turn: TurnInput, span_ids: list[str]) -> list[str]:
        """Remember the spans sent for ``turn``; return those not sent before (a late unit may repeat one)."""
        closed = self.closed.setdefault((turn.agent, turn.session, turn.key), ClosedTurn())
        fresh = [s for s in span_ids if s not in closed.span_ids]
        closed.span_ids.update(fresh)
        return fresh

    @property
    def open_turns(self) -> int:
        return len(self.open)

    # -- persistence ------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "open": [
                {
                    "agent": t.agent,
                    "session": t.session,
                    "key": t.key,
                    "entries": t.entries,
                    "last_arrival_ns": t.last_arrival_ns,
                    "last_event_ns": t.last_event_ns,
                    "ending_since_ns": t.ending_since_ns,
                }
                for t in self.open.values()
            ],
            "marker": self.marker.state(),
            "closed": [[*k, sorted(c.ids), sorted(c.span_ids)] for k, c in self.closed.items()],
            "late": [[*k, v] for k, v in self.late.items()],
        }

    def load_json(self, data: Mapping[str, Any]) -> None:
        for item in data.get("open", []):
            turn = OpenTurn(
                agent=item["agent"],
                session=item["session"],
                key=item["key"],
                entries=list(item["entries"]),
                last_arrival_ns=int(item["last_arrival_ns"]),
                ending_since_ns=item.get("ending_since_ns"),
            )
            turn.ids = {str(e.get("event.id") or "") for e in turn.entries}
            turn.last_event_ns = int(item.get("last_event_ns") or max(map(_event_ns, turn.entries), default=0))
            self.open[(turn.agent, turn.session, turn.key)] = turn
        self.marker = TurnMarker(data.get("marker"))
        for agent, session, key, ids, span_ids in data.get("closed", []):
            self.closed[(agent, session, key)] = ClosedTurn(set(ids), set(span_ids))
        for agent, session, key, entries in data.get("late", []):
            self.late[(agent, session, key)] = list(entries)


def _event_ns(entry: Mapping[str, Any]) -> int:
    try:
        return int(entry.get("time_unix_nano") or 0)
    except (TypeError, ValueError):
        return 0


def _live_state(turn: OpenTurn, now_ns: int, grace_ns: int, idle_ns: int) -> bool | None:
    if turn.ending_since_ns is not None:
        return True if now_ns - turn.ending_since_ns >= grace_ns else None
    return False if now_ns - turn.last_arrival_ns >= idle_ns else None
