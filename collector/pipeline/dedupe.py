"""Drop entries whose ``event.id`` was already delivered (hooks and transcripts describe the same
things; a replay after a crash re-reads the last uncommitted batch)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

RECENT = 200_000


class Deduper:
    def __init__(self, seen_in_store: Callable[[Iterable[str]], set[str]]) -> None:
        self._seen_in_store = seen_in_store
        self._recent: OrderedDict[str, None] = OrderedDict()
        self.dropped = 0

    def fresh(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        unknown = {e["event.id"] for e in entries if e["event.id"] not in self._recent}
        stored = self._seen_in_store(unknown) if unknown else set()
        out = []
        for entry in entries:
            eid = entry["event.id"]
            if eid in self._recent or eid in stored:
                self.dropped += 1
                continue
            self._remember(eid)
            out.append(entry)
        return out

    def forget(self, ids: Iterable[str]) -> None:
        """Ids of a record that was quarantined after all: a retry must not be taken for a duplicate."""
        for eid in ids:
            self._recent.pop(eid, None)

    def _remember(self, eid: str) -> None:
        self._recent[eid] = None
        if len(self._recent) > RECENT:
            self._recent.popitem(last=False)
