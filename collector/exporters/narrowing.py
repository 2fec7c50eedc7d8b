"""Which entry of a batch an exporter fails on: the batch is bisected, each half offered again.

An exporter that raises an unexpected exception (a bug, not an :class:`ExportError`) on a batch has
failed on *something* in it. :func:`narrow` offers halves of the batch again until every entry the
exporter fails on *by itself* is found (``O(log n)`` exports for one bad entry among ``n``): those are
*poison*; every other entry has been accepted once a half holding it went through. A half that went
through may have been offered before, as part of a larger half that failed: exporters recognise entries
they already hold by ``event.id`` (the JSONL file and the usage store do), and a failing ``export`` in the
built-in exporters accepts nothing of its batch.

An entry is poison only when it failed on its own; a batch that fails as a whole but not in parts costs
nothing. The search stops early:

* a retryable refusal or an error of the environment (:data:`ENVIRONMENT`: a full disk, a permission,
  memory) is *not* the data's doing: the search stops and the caller holds what was not accepted yet;
* a permanent refusal of a half: that half is refused for good (the caller counts it);
* ``max_poison`` entries failing alone: the exporter is broken, not the data; the rest is
  refused for good too (``broken``), so a buggy exporter cannot fill the quarantine with a whole batch.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from collector.exporters.base import Entry, ExportError

# Not the data's doing: a full disk, a permission, a locked or full database, no memory.
ENVIRONMENT: tuple[type[BaseException], ...] = (OSError, MemoryError, sqlite3.OperationalError)

MAX_POISON = 16  # entries failing alone in one batch before the exporter itself is taken as broken


@dataclass(slots=True)
class Narrowed:
    """What the search found in a batch an exporter failed on."""

    poison: list[tuple[Entry, BaseException]] = field(default_factory=list)  # failed alone, and why
    refused: list[Entry] = field(default_factory=list)  # refused for good (a permanent refusal, broken)
    held: list[Entry] = field(default_factory=list)  # not accepted yet when the search had to stop
    stop: BaseException | None = None  # why it stopped: a retryable ExportError or an environment error
    broken: BaseException | None = None  # set when max_poison entries failed alone


class _Stop(Exception):
    pass


class _Search:
    def __init__(self, export: Callable[[Sequence[Entry]], None], batch: Sequence[Entry], max_poison: int) -> None:
        self.export = export
        self.batch = batch
        self.max_poison = max_poison
        self.done = [False] * len(batch)  # accepted, poison or refused for good
        self.found = Narrowed()

    def offer(self, lo: int, hi: int) -> BaseException | None:
        """Offer batch[lo:hi]; None when accepted (or refused for good), else the unexpected error."""
        try:
            self.export(self.batch[lo:hi])
        except ExportError as exc:
            if exc.retryable:
                self.found.stop = exc
                raise _Stop from exc
            self.found.refused.extend(self.batch[lo:hi])
        except ENVIRONMENT as exc:
            self.found.stop = exc
            raise _Stop from exc
        except Exception as exc:  # noqa: BLE001 - the point: an exporter's bug, narrowed down
            return exc
        self.done[lo:hi] = [True] * (hi - lo)
        return None

    def search(self, lo: int, hi: int, error: BaseException | None, likely: bool = False) -> None:
        """batch[lo:hi] failed with ``error`` (None: not offered by itself yet; ``likely``: its sibling
        went through, so it probably fails: split it without offering it whole)."""
        if error is None and (hi - lo == 1 or not likely):
            error = self.offer(lo, hi)
            if error is None:
                return
        if hi - lo == 1:
            assert error is not None
            self.poisoned(lo, error)
            return
        mid = (lo + hi) // 2
        left = self.offer(lo, mid)
        if left is not None:
            self.search(lo, mid, left)
        self.search(mid, hi, None, likely=left is None)

    def poisoned(self, index: int, error: BaseException) -> None:
        self.done[index] = True
        self.found.poison.append((self.batch[index], error))
        if len(self.found.poison) >= self.max_poison:
            self.found.broken = error
            raise _Stop

    def rest(self) -> list[Entry]:
        return [e for e, done in zip(self.batch, self.done, strict=True) if not done]

    def stopped(self) -> None:
        """The search ended early: the rest is refused (a broken exporter) or held (try again later)."""
        if self.found.broken is not None:
            self.found.refused.extend(self.rest())
        else:
            self.found.held = self.rest()


def narrow(export: Callable[[Sequence[Entry]], None], batch: Sequence[Entry], error: BaseException,
           max_poison: int = MAX_POISON) -> Narrowed:
    """``export(batch)`` raised ``error``: find the entries it fails on alone (see the module docstring)."""
    search = _Search(export, batch, max_poison)
    try:
        search.search(0, len(batch), error)
    except _Stop:
        search.stopped()
    return search.found


def one_by_one(export: Callable[[Sequence[Entry]], None], batch: Sequence[Entry],
               before: Callable[[Entry], None], max_poison: int = MAX_POISON) -> Narrowed:
    """Offer each entry alone, calling ``before(entry)`` first (the crash guard names it: a process that
    dies in an exporter then leaves the entry's name, not the batch's)."""
    search = _Search(export, batch, max_poison)
    try:
        for index, entry in enumerate(batch):
            before(entry)
            error = search.offer(index, index + 1)
            if error is not None:
                search.poisoned(index, error)
    except _Stop:
        search.stopped()
    return search.found
