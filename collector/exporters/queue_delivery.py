"""The delivery thread of a durable queue: the queued batches, in order, to the inner exporter.

It reads a batch at the queue's acknowledged position (from the legacy directory first while that holds
entries), hands it to ``inner.export()`` and acknowledges it; on :class:`ExportError` it retries the
*same* batch with exponential backoff (at least the ``Retry-After`` the backend asked for), and drops a
batch the backend refused for good. An unexpected exception from ``inner`` is retried like a refusal;
once the same batch failed ``max_unexpected_failures`` times it is bisected (``collector.exporters.narrowing``): the
entries ``inner`` fails on alone go to the poison sink, the rest is delivered. When idle it calls
``inner.tick(now_ns)`` about once a second and, once asked (``end_of_input``), ``inner.end_of_input``.

:class:`QueueDelivery` is the part of :class:`~collector.exporters.queue.QueuedExporter` that runs on that
thread; the queue holds the state both sides share (the log, its lock, the counters).
"""

from __future__ import annotations

import logging
import random
import shutil
import threading
import time
from dataclasses import dataclass

import orjson

from collector.exporters.base import Entry, Exporter, ExportError, PoisonSink
from collector.exporters.narrowing import narrow
from collector.exporters.queue_log import Cursor, SegmentLog
from collector.exporters.queue_options import QueueOptions

_log = logging.getLogger("collector.exporters.queue")  # the queue's log, as it always was


@dataclass(slots=True)
class Batch:
    """A stretch of one log read for delivery: its entries and where it ends (to acknowledge it)."""

    entries: list[Entry]
    segment: int
    end_offset: int
    lines: int
    log: SegmentLog
    cursor: Cursor
    attempts: int = 0


@dataclass(slots=True)
class QueueCounters:
    """What a queue counts, for its ``stats()``: written by both the caller's side and the delivery thread."""

    enqueued: int = 0
    rejected: int = 0
    requeued: int = 0  # entries offered again after a restart, already in the log: not appended twice
    corrupt: int = 0
    failures: int = 0
    last_error: str | None = None
    last_success_ns: int | None = None
    backend_up: bool | None = None


class QueueDelivery:
    """The delivery thread's side of a queue; :class:`~collector.exporters.queue.QueuedExporter` sets
    these attributes up (the lock is the log's, the wake its condition)."""

    inner: Exporter
    poison: PoisonSink
    name: str
    options: QueueOptions
    _log: SegmentLog
    _cursor: Cursor
    _legacy: SegmentLog | None
    _lock: threading.Lock
    _wake: threading.Condition
    _stopping: threading.Event
    _counters: QueueCounters
    _ending: str  # "asked": end_of_input waits for the thread to tell inner; "done": it did

    def _pending(self) -> int:
        legacy = self._legacy.cursors[""].pending if self._legacy is not None else 0
        return self._cursor.pending + legacy

    def _run(self) -> None:
        backoff = 0.0
        least = 0.0  # the wait the backend asked for (Retry-After), at least
        batch: Batch | None = None
        last_tick = time.monotonic()
        while not self._stopping.is_set():
            if backoff:
                self._stopping.wait(max(least, backoff * random.uniform(0.8, 1.2)))
                if self._stopping.is_set():
                    break
            if batch is not None and self._is_stale(batch):
                batch = None  # its segment was dropped (cap) while it waited for the backend
            if batch is None:
                batch = self._next_batch()
            try:
                if batch is not None:
                    self._deliver(batch)
                    batch = None
                elif self._ending == "asked":
                    self._end_input()
                elif time.monotonic() - last_tick >= self.options.tick_interval:
                    last_tick = time.monotonic()
                    self._tick()
                else:
                    with self._wake:
                        self._log.save_if_due(self._cursor)
                        if self._pending() == 0 and not self._stopping.is_set():
                            self._wake.wait(self.options.tick_interval)
                    continue
                backoff = 0.0
            except ExportError as exc:
                if batch is not None and not exc.retryable:
                    self._reject(batch, str(exc))
                    batch = None
                    backoff = 0.0
                    continue
                backoff = self._failed(exc, backoff)
                least = exc.retry_after or 0.0
            except Exception as exc:  # noqa: BLE001 - a bug in an exporter must not kill delivery
                _log.exception("queue %s: unexpected error from %s", self.name, type(self.inner).__name__)
                if batch is not None:
                    batch.attempts += 1
                    if batch.attempts >= self.options.max_unexpected_failures:
                        batch = self._narrow(batch, exc)
                        if batch is None:
                            backoff = 0.0
                            continue
                backoff = self._failed(exc, backoff)

    def _source(self) -> tuple[SegmentLog, Cursor]:
        """The legacy directory while it holds entries (they are older), then the log."""
        if self._legacy is not None:
            cursor = self._legacy.cursors[""]
            if cursor.pending > 0:
                return self._legacy, cursor
            self._legacy.close("")
            shutil.rmtree(self._legacy.dir, ignore_errors=True)
            _log.info("queue %s: the older queue %s is delivered and removed", self.name, self._legacy.dir)
            self._legacy = None
        return self._log, self._cursor

    def _next_batch(self) -> Batch | None:
        with self._lock:
            source, cursor = self._source()
            if cursor.pending <= 0:
                return None
            start = (cursor.head.segment, cursor.head.offset)
            shared = source.parsed.get(start)  # a sibling read and parsed this stretch already
            if shared is not None:
                end, count, entries = shared
                return Batch(entries, start[0], end, count, source, cursor)
            lines, segment, end = source.read_batch(cursor, self.options.max_batch, self.options.max_batch_bytes)
            if not lines and end == cursor.head.offset:
                return None
            start = (segment, cursor.head.offset)
        entries = self._parse(lines)
        with self._lock:
            source.keep_parsed(start, (end, len(lines), entries))
        return Batch(entries, segment, end, len(lines), source, cursor)

    def _parse(self, lines: list[bytes]) -> list[Entry]:
        """The entries of the lines (shared with the log's other consumers: none of them changes one)."""
        entries: list[Entry] = []
        for line in lines:
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError:
                value = None
            if isinstance(value, dict):
                entries.append(value)
            else:
                with self._lock:
                    self._counters.corrupt += 1
                _log.error("queue %s: skipping a corrupt line (%d bytes)", self.name, len(line))
        return entries

    def _is_stale(self, batch: Batch) -> bool:
        with self._lock:
            return batch.segment != batch.cursor.head.segment

    def _deliver(self, batch: Batch) -> None:
        if batch.entries:
            self.inner.export(batch.entries)
        self._commit(batch, delivered=len(batch.entries))
        with self._lock:
            self._counters.last_success_ns = time.time_ns()
            if self._counters.backend_up is False:
                _log.info("queue %s: backend reachable again", self.name)
            self._counters.backend_up = True

    def _commit(self, batch: Batch, delivered: int) -> None:
        with self._wake:
            batch.log.acknowledge(batch.cursor, batch.segment, batch.end_offset, batch.lines, delivered)
            self._wake.notify_all()

    def _narrow(self, batch: Batch, error: Exception) -> Batch | None:
        """``inner`` keeps failing on ``batch``: find the entries it fails on alone (``collector.exporters.narrowing``),
        hand them to the poison sink and deliver the rest. None when the batch is done; else the batch
        with what is left (the backend went away meanwhile: retried with backoff)."""
        found = narrow(self.inner.export, batch.entries, error)
        for entry, why in found.poison:
            reason = f"{self.name}: {type(why).__name__}"
            _log.error("queue %s: entry %s fails alone, quarantined: %s", self.name, entry.get("event.id"), reason)
            self.poison(entry, reason)
        with self._lock:
            self._counters.rejected += len(found.poison) + len(found.refused)
        if found.stop is not None:
            batch.entries, batch.attempts = found.held, 0  # a new list: the parsed one is shared
            return batch
        self._commit(batch, delivered=len(batch.entries) - len(found.poison) - len(found.refused))
        with self._lock:
            self._counters.last_success_ns = time.time_ns()
        return None

    def _reject(self, batch: Batch, reason: str) -> None:
        _log.error(
            "queue %s: backend refused %d entries for good, dropping them: %s",
            self.name,
            len(batch.entries),
            reason,
        )
        with self._lock:
            self._counters.rejected += len(batch.entries)
            self._counters.last_error = reason
        self._commit(batch, delivered=0)

    def _end_input(self) -> None:
        """Tell ``inner`` its input has ended (once; a failed send is retried by later ticks)."""
        end = getattr(self.inner, "end_of_input", None)
        try:
            if callable(end):
                end(time.time_ns())
        finally:
            with self._wake:
                self._ending = "done"
                self._wake.notify_all()

    def _tick(self) -> None:
        tick = getattr(self.inner, "tick", None)
        if callable(tick):
            tick(time.time_ns())

    def _failed(self, exc: Exception, backoff: float) -> float:
        with self._lock:
            self._counters.failures += 1
            self._counters.last_error = str(exc)
            was_up = self._counters.backend_up
            self._counters.backend_up = False
        if was_up is not False:
            _log.warning("queue %s: delivery failed, retrying with backoff: %s", self.name, exc)
        else:
            _log.debug("queue %s: still failing: %s", self.name, exc)
        if backoff <= 0:
            return self.options.backoff_initial
        return min(backoff * 2, self.options.backoff_max)
