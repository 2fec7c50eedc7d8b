"""Per-session state in O(1): the most recently used sessions in memory (an LRU), the others in the
checkpoint store.

A component (the correlator, the status tracker) asks :meth:`SessionCache.get` for a session; one that
left memory is loaded back through ``load`` (the checkpoint store, read only). What changed since the last
commit (sessions touched, sessions evicted before they were saved) is handed out once by
:meth:`SessionCache.drain`, and the caller puts it into the batch's commit, so the store stays the only
writer. An agent's output therefore does not depend on how many other sessions share the memory.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

S = TypeVar("S")


class SessionCache(Generic[S]):
    def __init__(self, cap: int, load: Callable[[str], S | None] | None = None, keep_evicted: bool = True) -> None:
        """``keep_evicted`` False: a session that leaves memory is dropped, not parked for :meth:`drain`
        (a cache nobody drains, with no store behind it)."""
        self._cap = max(1, cap)
        self._load = load
        self._keep = keep_evicted
        self._items: OrderedDict[str, S] = OrderedDict()
        self._dirty: set[str] = set()
        self._parked: dict[str, S] = {}  # evicted before they were saved
        self._last: tuple[str, S] | None = None  # the session got or put last: the most recent, to be saved

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def get(self, key: str) -> S | None:
        """The session (now the most recent, and to be saved), from memory or the store; None: unknown."""
        last = self._last
        if last is not None and last[0] == key:  # a backfill reads a session's entries one after another
            return last[1]
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        else:
            value = self._parked.pop(key, None)
            if value is None and self._load is not None:
                value = self._load(key)
            if value is None:
                return None
            self._insert(key, value)
        self._dirty.add(key)
        self._last = (key, value)
        return value

    def put(self, key: str, value: S) -> None:
        """A new session (or one taken back from saved state), to be saved."""
        self._parked.pop(key, None)
        self._items.pop(key, None)
        self._insert(key, value)
        self._dirty.add(key)
        self._last = (key, value)

    def _insert(self, key: str, value: S) -> None:
        self._items[key] = value
        while len(self._items) > self._cap:
            old, state = self._items.popitem(last=False)
            if old in self._dirty:
                self._dirty.discard(old)
                if self._keep:
                    self._parked[old] = state

    def items(self) -> Iterator[tuple[str, S]]:
        """The sessions in memory, least recently used first."""
        return iter(list(self._items.items()))

    def drain(self) -> list[tuple[str, S]]:
        """What changed since the last call: to be written to the store with the next commit."""
        out = list(self._parked.items())
        out.extend((key, self._items[key]) for key in self._dirty if key in self._items)
        self._parked.clear()
        self._dirty.clear()
        self._last = None  # to be saved again when next got
        return out
