"""A bounded, durable, on-disk queue in front of an exporter, with ordered delivery and backoff.

``QueuedExporter(inner, dir, cap_bytes)`` is an :class:`Exporter` whose ``export()`` only appends the batch
to segment files on disk (one JSON line per entry, one write and one fsync per batch) and returns. A
background thread reads the queue in order and hands batches to ``inner.export()``; on
:class:`ExportError` it retries the *same* batch with exponential backoff, so a slow or dead backend never
stalls the caller. Progress is an acknowledged position (segment number + byte offset) written after
each delivered batch by default (``collector.exporters.queue_log``), so after a ``kill -9`` delivery
resumes at the last written position: at most the one batch whose 2xx came just before is sent again
(at-least-once; entries keep their deterministic ids). Entries the log held when it was opened are not
appended again when a source offers them again (its checkpoint had not committed before the kill).

Several queues can share one :class:`~collector.exporters.queue_log.SegmentLog` (``log=``, each with its
``consumer`` name): the signals of one OTLP backend. The batch is then serialised and written once, for all
of them (the first of them to receive it writes; the others find it already there), and each reads it at
its own pace with its own position, backoff and delivery thread, so a slow signal does not stall another.

An unexpected exception from ``inner`` (a bug, not an ``ExportError``) is retried like a refusal; once the
same batch failed ``max_unexpected_failures`` times it is bisected (``collector.exporters.narrowing``): the entries
``inner`` fails on alone go to the poison sink (the quarantine, with the exporter's name and the
exception), the rest is delivered.

When the log holds more than ``cap_bytes``, whole segments are dropped from the oldest end; the entries
that were still undelivered in them are counted (``dropped``) and logged.

If ``inner`` has a ``checkpoint(position)`` method, it is called before every write of the queue's
position, with that position: ``inner`` saves, in one write, what it holds of the entries up to there and
the position itself; at start the queue resumes from ``inner.restored_position()`` when that is ahead of
its ack file (a kill between the two writes).
If ``inner`` has a ``tick(now_ns)`` method the delivery thread calls it about once a second when it has
nothing else to do (the trace exporter closes idle turns there); an ``ExportError`` from ``tick`` is retried
with the same backoff.

``end_of_input()`` is for a run that ends (``collect --once``): once everything queued has reached
``inner``, the delivery thread calls ``inner.end_of_input(now_ns)`` (the trace exporter sends the turns its
input shows finished) and goes on delivering and retrying as usual; the caller waits until nothing is left
(queued here or, per ``inner.backlog()``, unsent there), giving up after a stretch without progress, and
learns what is left (it stays on disk for the next run or the daemon).

A queue can also drain a *legacy* directory first (``legacy=``: a queue of one consumer, as older versions
kept one per signal); once it is empty it is removed.

This module is the queue's face and the caller's side (the door, the controls, the stats); the delivery
thread is :mod:`collector.exporters.queue_delivery`, the tunables :mod:`collector.exporters.queue_options`.
"""


from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from collector.exporters.base import Entry, Exporter, ExportError, PoisonSink, no_sink
from collector.exporters.queue_delivery import QueueCounters, QueueDelivery
from collector.exporters.queue_log import ACK_FILE, Position, SegmentLog, segment_name
from collector.exporters.queue_options import QueueOptions, new_log
from collector.model.entry import delivery_id

_log = logging.getLogger(__name__)

__all__ = ["ACK_FILE", "Backlog", "QueuedExporter", "QueueOptions", "SegmentLog", "segment_name", "new_log"]
DEFAULT_CAP_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Backlog:
    """What ``end_of_input`` left undelivered: entries still queued, items the inner exporter holds."""

    name: str
    queued: int
    unsent: int
    error: str | None

    @property
    def empty(self) -> bool:
        return self.queued == 0 and self.unsent == 0



def _with_position(checkpoint: Any) -> Any:
    """``inner.checkpoint(position)``: the inner exporter saves its state with the queue position it covers."""

    def save(head: Position) -> None:
        checkpoint({"segment": head.segment, "offset": head.offset})

    return save



class QueuedExporter(QueueDelivery):
    """Durable queue + ordered background delivery to ``inner`` (see module docstring)."""

    def __init__(
        self,
        inner: Exporter,
        dir: Path,  # noqa: A002 - the name the interface documents
        cap_bytes: int = DEFAULT_CAP_BYTES,
        options: QueueOptions | None = None,
        start: bool = True,
        poison: PoisonSink | None = None,
        log: SegmentLog | None = None,  # noqa: A002 - shadows the logger only here
        consumer: str = "",
        legacy: Path | None = None,
    ) -> None:
        self.inner = inner
        self.poison = poison or no_sink
        self.name = inner.name
        self.options = options or QueueOptions()
        self._log = log if log is not None else new_log(Path(dir), cap_bytes, [consumer], self.options)
        self._cursor = self._log.cursors[consumer]
        checkpoint = getattr(inner, "checkpoint", None)
        self._cursor.before_save = _with_position(checkpoint) if callable(checkpoint) else None
        restored = getattr(inner, "restored_position", None)
        if callable(restored):
            with self._log.lock:
                self._log.resume(self._cursor, restored())
        self._consumer = consumer
        self._legacy = new_log(legacy, 1 << 62, [""], self.options) if legacy is not None else None
        self._lock = self._log.lock
        self._wake = self._log.wake
        self._stopping = threading.Event()
        self._closed = False
        self._counters = QueueCounters()
        self._thread: threading.Thread | None = None
        self._ending = ""  # "asked": end_of_input waits for the thread to tell inner; "done": it did
        if self.pending:
            _log.info("queue %s: %d entries left from a previous run", self.name, self.pending)
        if start:
            self.start()

    # -- the Exporter interface ------------------------------------------------------------------------------
    def export(self, batch: Sequence[Entry]) -> None:
        if not batch:
            return
        if self._closed:
            raise ExportError(f"{self.name}: queue is shut down", retryable=False)
        key = (id(batch), len(batch), id(batch[0]), id(batch[-1]))  # the very batch a sibling wrote
        with self._lock:
            claimed = self._log.claim(self._consumer, key)
        if claimed is not None:
            self._counters.enqueued += claimed
            return
        batch = self._not_queued_yet(batch)
        lines, count = self._serialise(batch)
        with self._wake:
            try:
                self._log.append(lines, count, self._consumer, key)
            except OSError as exc:
                raise ExportError(f"{self.name}: cannot write queue: {exc}") from exc
            self._counters.enqueued += count
            dropped = self._log.enforce_cap()
            if dropped:
                _log.error("queue %s over its cap of %d bytes: dropped the oldest entries (%s)", self._log.dir,
                           self._log.cap_bytes, ", ".join(f"{k or self.name}: {v}" for k, v in dropped.items()))
            self._wake.notify_all()

    def _not_queued_yet(self, batch: Sequence[Entry]) -> Sequence[Entry]:
        """Without the entries the log held when this run opened it (``SegmentLog.recent_ids``): a batch
        the previous run queued and died before its source checkpoint committed comes back once."""
        with self._lock:
            recent = self._log.recent_ids()
            if not recent:
                return batch
            fresh = []
            for entry in batch:
                eid = delivery_id(entry)
                if eid is not None and eid in recent:
                    recent.discard(eid)
                    self._counters.requeued += 1
                else:
                    fresh.append(entry)
        return fresh if len(fresh) < len(batch) else batch

    def _serialise(self, batch: Sequence[Entry]) -> tuple[bytes, int]:
        """The batch as JSON lines; an entry that is not JSON (a lone surrogate, an object) is poison:
        counted, handed to the poison sink, and the rest goes on."""
        lines = []
        for entry in batch:
            try:
                lines.append(orjson.dumps(entry))
            except TypeError as exc:  # orjson.JSONEncodeError is one
                reason = f"not JSON-serialisable: {exc}"
                _log.error("queue %s: entry %s refused at the door: %s", self.name, entry.get("event.id"), reason)
                with self._lock:
                    self._counters.rejected += 1
                self.poison(entry, reason)
        return (b"\n".join(lines) + b"\n" if lines else b""), len(lines)

    def shutdown(self) -> None:
        """Deliver what can be delivered within ``drain_timeout``, then stop; the rest stays on disk."""
        if self._closed:
            return
        self._closed = True
        self.flush(self.options.drain_timeout)
        self._stopping.set()
        with self._wake:
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=0.5)
        try:
            self.inner.shutdown()  # also aborts an export blocked in a send
        finally:
            if self._thread is not None:
                self._thread.join(timeout=30)
            with self._lock:
                self._log.close(self._consumer)
                if self._legacy is not None:
                    self._legacy.close("")

    def stats(self) -> dict[str, Any]:
        with self._lock:
            c = self._counters
            out: dict[str, Any] = {
                "queued": self._pending(),
                "queued_bytes": self._log.total_bytes,
                "cap_bytes": self._log.cap_bytes,
                "segments": len(self._log.segments),
                "enqueued": c.enqueued,
                "delivered": self._cursor.delivered_total,
                "dropped": self._cursor.dropped_total,
                "rejected": c.rejected,
                "requeued_skipped": c.requeued,
                "corrupt": c.corrupt,
                "failures": c.failures,
                "backend_up": c.backend_up,
                "last_error": c.last_error,
                "last_success_ns": c.last_success_ns,
            }
        try:
            out["inner"] = self.inner.stats()
        except Exception as exc:  # noqa: BLE001 - status must never fail
            out["inner"] = {"error": str(exc)}
        return out

    # -- control ------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"queue-{self.name}", daemon=True)
            self._thread.start()

    def flush(self, timeout: float) -> bool:
        """Wait until everything queued has been delivered (or ``timeout`` passed)."""
        deadline = time.monotonic() + timeout
        with self._wake:
            while self._pending() > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._thread is None or not self._thread.is_alive():
                    return False
                self._wake.wait(min(remaining, 0.05))
        return True

    def end_of_input(self, stall_s: float, limit_s: float) -> Backlog:
        """Nothing more will be queued: deliver everything, let ``inner`` finish what its input shows
        finished, and wait until that is delivered too, or ``stall_s`` pass without progress (``limit_s``
        in all). Returns what is left."""
        with self._wake:
            self._ending = "asked"
            self._wake.notify_all()
        started = changed = time.monotonic()
        seen: tuple[int, int, str] | None = None
        while True:
            now = (self.pending, self._inner_backlog(), self._ending)
            if now == (0, 0, "done"):
                break
            if now != seen:
                seen, changed = now, time.monotonic()
            alive = self._thread is not None and self._thread.is_alive()
            if not alive or time.monotonic() - changed >= stall_s or time.monotonic() - started >= limit_s:
                break
            with self._wake:
                self._wake.wait(0.05)
        with self._lock:
            error = self._counters.last_error if not (now[0] == 0 and now[1] == 0) else None
        return Backlog(self.name, now[0], now[1], error)

    def _inner_backlog(self) -> int:
        backlog = getattr(self.inner, "backlog", None)
        return int(backlog()) if callable(backlog) else 0

    @property
    def pending(self) -> int:
        with self._lock:
            return self._pending()
