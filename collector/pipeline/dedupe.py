"""Drop entries whose ``event.id`` was already delivered (hooks and transcripts describe the same
things; a replay after a crash re-reads the last uncommitted batch)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

RECENT = 50_000  # 25 batches of the default size; older ids are asked of the store (200,000 held 26 MB)


class Deduper:
    """The ids of the last ``RECENT`` fresh entries are answered from memory (a set, and a queue for their
    order), every other id by ``seen_in_store``."""

    def __init__(self, seen_in_store: Callable[[Iterable[str]], set[str]]) -> None:
        self._seen_in_store = seen_in_store
        self._recent: set[str] = set()
        self._order: deque[str] = deque()
        self.dropped = 0

    def fresh(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        ids = [e["event.id"] for e in entries]
        recent = self._recent
        unknown = set(ids).difference(recent)
        stored = self._seen_in_store(unknown) if unknown else set()
        if len(unknown) == len(ids) and not stored:  # all distinct, none delivered: a backfill's batch
            self._remember(ids)
            return list(entries)
        out = []
        for entry, eid in zip(entries, ids, strict=True):
            if eid in recent or eid in stored:
                self.dropped += 1
                continue
            self._remember((eid,))
            out.append(entry)
        return out

    def forget(self, ids: Iterable[str]) -> None:
        """Ids of a record that was quarantined after all: a retry must not be taken for a duplicate."""
        for eid in ids:
            if eid in self._recent:
                self._recent.discard(eid)
                self._order.remove(eid)  # rare (a quarantined record): a pass over the queue

    def _remember(self, ids: Iterable[str]) -> None:
        self._recent.update(ids)
        self._order.extend(ids)
        while len(self._order) > RECENT:
            self._recent.discard(self._order.popleft())
