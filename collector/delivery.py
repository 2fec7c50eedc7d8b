"""The end of the chain: a finished batch goes to every exporter, then its checkpoint is committed.

An exporter accepts a batch or raises :class:`ExportError`; it never sleeps or retries. A retryable
refusal (a full disk under the JSONL output or under a durable queue) *holds* the batch here, with its
checkpoint uncommitted: the worker offers it again on a later cycle to the exporters that have not
taken it yet, and reads nothing new meanwhile, so what waits is one batch. If the daemon stops first the
held batch is dropped from memory; its positions were never committed, so the next start reads those
records again (the exporters recognise entries they already hold by ``event.id``). A permanent refusal
is logged and counted, and the batch goes on without that exporter. The only loop that retries sending
over time is the durable queue's (``collector.exporters.queue``).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from collector.exporters.base import Entry, Exporter, ExportError
from collector.state.checkpoints import CheckpointStore, Commit

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Held:
    """A batch not accepted yet: who still has to take it, and why the last one refused."""

    entries: list[Entry]
    commit: Commit
    waiting: list[Exporter]
    refused_by: str
    error: str
    since: float
    attempts: int = 1


@dataclass(slots=True)
class DeliveryStats:
    batches: int = 0
    rejected: dict[str, int] = field(default_factory=dict)  # exporter -> entries refused for good
    refusals: int = 0  # retryable refusals seen (each one held a batch)


class Delivery:
    def __init__(self, exporters: Sequence[Exporter], store: CheckpointStore,
                 clock: Callable[[], float] = time.time) -> None:
        self.exporters = list(exporters)
        self.store = store
        self.clock = clock
        self.held: Held | None = None
        self.stats = DeliveryStats()

    def deliver(self, entries: list[Entry], commit: Commit) -> bool:
        """Hand ``entries`` to every exporter and commit; False: held (see :meth:`retry`)."""
        if self.held is not None:
            raise RuntimeError("a held batch must be delivered first")
        held = Held(entries, commit, list(self.exporters), "", "", self.clock(), attempts=0)
        return self._attempt(held)

    def retry(self) -> bool:
        """Offer the held batch again; True when nothing is held any more."""
        held = self.held
        if held is None:
            return True
        self.held = None
        return self._attempt(held)

    def _attempt(self, held: Held) -> bool:
        held.attempts += 1
        while held.waiting:
            exporter = held.waiting[0]
            try:
                if held.entries:
                    exporter.export(held.entries)
            except ExportError as exc:
                if exc.retryable:
                    return self._hold(held, exporter.name, str(exc))
                self._reject(exporter.name, len(held.entries), exc)
            held.waiting.pop(0)
        try:
            self.store.commit(self._with_marks(held.commit))
        except sqlite3.Error as exc:  # e.g. "database or disk is full": the exporters keep what they took
            return self._hold(held, "checkpoint store", str(exc))
        if held.attempts > 1:
            log.info("delivery resumed: a batch of %d entries refused by %s since %.0fs ago is accepted",
                     len(held.entries), held.refused_by, self.clock() - held.since)
        self.stats.batches += 1
        return True

    def _with_marks(self, commit: Commit) -> Commit:
        """Exporters that know where their own output stands (``mark()``) store it with the checkpoint."""
        for exporter in self.exporters:
            mark = getattr(exporter, "mark", None)
            if callable(mark):
                commit.kv[f"exporter.{exporter.name}"] = mark()
        return commit

    def _hold(self, held: Held, who: str, error: str) -> bool:
        if held.attempts == 1 or who != held.refused_by:
            self.stats.refusals += 1
            log.error("%s refused a batch of %d entries (%s); holding it, positions not committed",
                      who, len(held.entries), error)
        held.refused_by, held.error = who, error
        self.held = held
        return False

    def _reject(self, name: str, count: int, exc: ExportError) -> None:
        self.stats.rejected[name] = self.stats.rejected.get(name, 0) + count
        log.error("exporter %s refused %d entries for good, going on without it: %s", name, count, exc)

    def status(self) -> dict[str, Any]:
        held = self.held
        return {
            "state": "ok" if held is None else "blocked",
            "batches": self.stats.batches,
            "refusals": self.stats.refusals,
            "rejected": dict(self.stats.rejected),
            "blocked": None if held is None else {
                "by": held.refused_by, "error": held.error, "since": held.since,
                "entries_waiting": len(held.entries), "attempts": held.attempts,
            },
        }
