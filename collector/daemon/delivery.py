"""The end of the chain: a finished batch goes to every exporter, then its checkpoint is committed.

An exporter accepts a batch or raises :class:`ExportError`; it never sleeps or retries. A retryable
refusal (a full disk under the JSONL output or under a durable queue) *holds* the batch here, with its
checkpoint uncommitted: the worker offers it again on a later cycle to the exporters that have not
taken it yet, and reads nothing new meanwhile, so what waits is one batch. If the daemon stops first the
held batch is dropped from memory; its positions were never committed, so the next start reads those
records again (the exporters recognise entries they already hold by ``event.id``). A permanent refusal
is logged and counted, and the batch goes on without that exporter. The only loop that retries sending
over time is the durable queue's (``collector.exporters.queue``).

An exporter that *fails* on a batch (an unexpected exception, a bug: not an ``ExportError``) has failed on
an entry: the batch is bisected until the entries it fails on alone are found (``collector.exporters.narrowing``);
those go to the quarantine for that exporter (``poison``: with the record they came from, the exporter's
name and the exception), every other entry is delivered, and the batch goes on. An environment error
raised as is (``OSError``: a full disk, a permission) is not the data's doing: it holds the batch like a
retryable refusal. A process that *dies* in an exporter is the crash guard's business
(``collector.pipeline.crash_guard``): the batch is named while an exporter takes it.
"""

from __future__ import annotations

import bisect
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from collector.exporters.base import Entry, Exporter, ExportError
from collector.exporters.narrowing import ENVIRONMENT, Narrowed, narrow, one_by_one
from collector.pipeline.crash_guard import CrashGuard
from collector.pipeline.quarantine import describe
from collector.state.checkpoints import CheckpointStore, Commit, drop_unsavable

log = logging.getLogger(__name__)


Origins = Sequence[tuple[int, Any]]  # (index of its first entry in the batch, the record the entries came from)
UNSAVABLE = (TypeError, ValueError, OverflowError)  # what encoding a value can raise (UnicodeError is a ValueError)
Poison = Callable[[Entry, Any, str, str], None]  # (entry, its record or None, exporter, reason) -> quarantine


def no_poison(entry: Entry, origin: Any, exporter: str, reason: str) -> None:
    log.error("exporter %s failed on entry %s (%s); nothing keeps it", exporter, entry.get("event.id"), reason)


@dataclass(slots=True)
class Held:
    """A batch not accepted yet: who still has to take it (and which of its entries), and why the last
    one refused."""

    entries: list[Entry]
    commit: Commit
    waiting: list[tuple[Exporter, list[Entry]]]
    refused_by: str
    error: str
    since: float
    attempts: int = 1
    origins: Origins = ()
    lines: Sequence[bytes] | None = None  # each entry's JSON (from the pipeline's encode check), if known


@dataclass(slots=True)
class DeliveryStats:
    batches: int = 0
    rejected: dict[str, int] = field(default_factory=dict)  # exporter -> entries refused for good
    refusals: int = 0  # retryable refusals seen (each one held a batch)
    poisoned: dict[str, int] = field(default_factory=dict)  # exporter -> entries it failed on (quarantined)
    unsaved: dict[str, int] = field(default_factory=dict)  # kind of state the checkpoint store could not save
    last_unsaved: str | None = None  # the last such part and why


class Delivery:
    def __init__(self, exporters: Sequence[Exporter], store: CheckpointStore,
                 clock: Callable[[], float] = time.time, poison: Poison = no_poison,
                 guard: CrashGuard | None = None) -> None:
        self.exporters = list(exporters)
        self.store = store
        self.clock = clock
        self.poison = poison
        self.guard = guard
        self.held: Held | None = None
        self.stats = DeliveryStats()

    def deliver(self, entries: list[Entry], commit: Commit, origins: Origins = (),
                lines: Sequence[bytes] | None = None) -> bool:
        """Hand ``entries`` to every exporter and commit; False: held (see :meth:`retry`). ``origins``:
        the records the entries came from, for the quarantine of an entry an exporter fails on; ``lines``:
        each entry's JSON, for exporters that take it (``export_lines``) instead of encoding it again."""
        return self.deliver_to([(e, entries) for e in self.exporters], entries, commit, origins, lines)

    def deliver_to(self, waiting: list[tuple[Exporter, list[Entry]]], entries: list[Entry], commit: Commit,
                   origins: Origins = (), lines: Sequence[bytes] | None = None) -> bool:
        """Hand each exporter its entries (a quarantine retry: only the exporter that failed on them)."""
        if self.held is not None:
            raise RuntimeError("a held batch must be delivered first")
        held = Held(entries, commit, waiting, "", "", self.clock(), attempts=0, origins=origins, lines=lines)
        return self._attempt(held)

    def exporter(self, name: str) -> Exporter | None:
        return next((e for e in self.exporters if e.name == name), None)

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
            exporter, entries = held.waiting[0]
            left = self._offer(exporter, entries, held)
            if self.guard is not None:  # not on the way out of a death: the next start reads the name
                self.guard.clear()
            if left is not None:
                held.waiting[0] = (exporter, left[0])
                return self._hold(held, exporter.name, left[1])
            held.waiting.pop(0)
        try:
            self._commit(self._with_marks(held.commit))
        except sqlite3.Error as exc:  # e.g. "database or disk is full": the exporters keep what they took
            return self._hold(held, "checkpoint store", str(exc))
        if held.attempts > 1:
            log.info("delivery resumed: a batch of %d entries refused by %s since %.0fs ago is accepted",
                     len(held.entries), held.refused_by, self.clock() - held.since)
        self.stats.batches += 1
        return True

    def _commit(self, commit: Commit) -> None:
        """Commit; a part the store cannot write (a value no source should have let through) is left out,
        logged and counted, and the rest is committed: data never stops the worker. A dropped position
        leaves its stream where it was committed before (read again, its entries known by id)."""
        try:
            self.store.commit(commit)
        except UNSAVABLE:
            dropped = drop_unsavable(commit)
            if not dropped:
                raise
            for kind, what in dropped:
                self.stats.unsaved[kind] = self.stats.unsaved.get(kind, 0) + 1
                self.stats.last_unsaved = what
                log.error("the checkpoint store cannot save %s; left out, the rest of the batch is committed", what)
            self.store.commit(commit)

    def _offer(self, exporter: Exporter, entries: list[Entry], held: Held) -> tuple[list[Entry], str] | None:
        """``exporter`` takes ``entries``; None when done with them, else (what it did not take, why)."""
        entries = self._spare_condemned(exporter, entries, held)
        if not entries:
            return None
        guard = self.guard
        if guard is not None and guard.exporting(exporter.name, entries):
            log.warning("exporter %s takes a batch of %d entries one at a time (the previous run died in it)",
                        exporter.name, len(entries))
            return self._settle(exporter, one_by_one(exporter.export, entries,
                                                     lambda e: guard.exporting_entry(exporter.name, e)), held)
        try:
            _export(exporter, entries, held)
        except ExportError as exc:
            if exc.retryable:
                return entries, str(exc)
            self._reject(exporter.name, len(entries), exc)
        except ENVIRONMENT as exc:
            return entries, f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # noqa: BLE001 - an exporter's bug: find the entry, keep the rest flowing
            log.error("exporter %s failed on a batch of %d entries; finding the entry", exporter.name,
                      len(entries), exc_info=exc)
            return self._settle(exporter, narrow(exporter.export, entries, exc), held)
        return None

    def _settle(self, exporter: Exporter, found: Narrowed, held: Held) -> tuple[list[Entry], str] | None:
        for entry, error in found.poison:
            self._poisoned(exporter.name, entry, held, describe(error))
        if found.refused:
            self._reject(exporter.name, len(found.refused), found.broken or ExportError("refused", False))
        if found.stop is not None:
            return found.held, str(found.stop)
        return None

    def _spare_condemned(self, exporter: Exporter, entries: list[Entry], held: Held) -> list[Entry]:
        """Entries the previous runs died exporting to ``exporter`` go to the quarantine instead."""
        guard = self.guard
        if guard is None or not guard.has_condemned():
            return entries
        keep = []
        for entry in entries:
            if guard.condemned_entry(exporter.name, entry):
                self._poisoned(exporter.name, entry, held, "the collector died while exporting it")
            else:
                keep.append(entry)
        return keep

    def _poisoned(self, name: str, entry: Entry, held: Held, reason: str) -> None:
        self.stats.poisoned[name] = self.stats.poisoned.get(name, 0) + 1
        log.error("exporter %s failed on entry %s (%s); it goes to the quarantine", name, entry.get("event.id"),
                  reason)
        self.poison(entry, _origin(entry, held), name, f"{name}: {reason}")

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

    def _reject(self, name: str, count: int, exc: BaseException) -> None:
        self.stats.rejected[name] = self.stats.rejected.get(name, 0) + count
        log.error("exporter %s refused %d entries for good, going on without it: %s", name, count, exc)

    def status(self) -> dict[str, Any]:
        held = self.held
        return {
            "state": "ok" if held is None else "blocked",
            "batches": self.stats.batches,
            "refusals": self.stats.refusals,
            "rejected": dict(self.stats.rejected),
            "poisoned": dict(self.stats.poisoned),
            "unsaved": dict(self.stats.unsaved),
            "last_unsaved": self.stats.last_unsaved,
            "blocked": None if held is None else {
                "by": held.refused_by, "error": held.error, "since": held.since,
                "entries_waiting": len(held.entries), "attempts": held.attempts,
            },
        }


def _export(exporter: Exporter, entries: list[Entry], held: Held) -> None:
    """``exporter.export(entries)``, or with the entries' JSON when it takes it and it is the whole batch's."""
    export_lines = getattr(exporter, "export_lines", None)
    if export_lines is not None and held.lines is not None and entries is held.entries:
        export_lines(entries, held.lines)
    else:
        exporter.export(entries)


def _origin(entry: Entry, held: Held) -> Any:
    """The record ``entry`` came from (None: the collector made it, or nobody said)."""
    if not held.origins:
        return None
    index = next((i for i, e in enumerate(held.entries) if e is entry), None)
    if index is None:
        return None
    at = bisect.bisect_right([start for start, _ in held.origins], index) - 1
    return held.origins[at][1] if at >= 0 else None
