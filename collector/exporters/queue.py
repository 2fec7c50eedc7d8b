"""A bounded, durable, on-disk queue in front of an exporter, with ordered delivery and backoff.

``QueuedExporter(inner, dir, cap_bytes)`` is an :class:`Exporter` whose ``export()`` only appends the batch
to segment files on disk (one JSON line per entry, fsync'd) and returns. A background thread reads the queue
in order and hands batches to ``inner.export()``; on :class:`ExportError` it retries the *same* batch with
exponential backoff, so a slow or dead backend never stalls the caller. Progress is an acknowledged position
(segment number + byte offset) in ``ack.json``, replaced atomically after every delivered batch, so a
``kill -9`` at any moment loses nothing: after a restart delivery resumes at the last acknowledged batch
(at-least-once; entries keep their deterministic ids).

Layout of ``dir``::

    seg-00000000000000000001.jsonl   oldest segment still holding undelivered entries
    seg-00000000000000000002.jsonl   ...
    ack.json                         {"segment": 1, "offset": 4096, "dropped": 0, "delivered": 10}

When the queue holds more than ``cap_bytes``, whole segments are dropped from the oldest end; the entries
that were still undelivered in them are counted (``dropped``), logged, and kept in ``ack.json``.

If ``inner`` has a ``tick(now_ns)`` method the delivery thread calls it about once a second when it has
nothing else to do (the trace exporter closes idle turns there); an ``ExportError`` from ``tick`` is retried
with the same backoff.

``end_of_input()`` is for a run that ends (``collect --once``): once everything queued has reached
``inner``, the delivery thread calls ``inner.end_of_input(now_ns)`` (the trace exporter sends the turns its
input shows finished) and goes on delivering and retrying as usual; the caller waits until nothing is left
(queued here or, per ``inner.backlog()``, unsent there), giving up after a stretch without progress, and
learns what is left (it stays on disk for the next run or the daemon).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from collector.exporters.base import Entry, Exporter, ExportError, PoisonSink, no_sink
from collector.util import private
from collector.util.atomic import atomic_write

log = logging.getLogger(__name__)

ACK_FILE = "ack.json"
SEGMENT_PREFIX = "seg-"
SEGMENT_SUFFIX = ".jsonl"
DEFAULT_CAP_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class QueueOptions:
    """Tunables; the defaults suit a daemon, tests shrink them."""

    max_batch: int = 512
    max_batch_bytes: int = 4 * 1024 * 1024
    segment_bytes: int | None = None  # default: cap/8, between 4 KiB and 8 MiB
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    tick_interval: float = 1.0
    drain_timeout: float = 2.0
    max_unexpected_failures: int = 5


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


@dataclass(slots=True)
class _Position:
    segment: int
    offset: int


@dataclass(slots=True)
class _Batch:
    entries: list[Entry]
    segment: int
    end_offset: int
    lines: int
    attempts: int = 0


@dataclass(slots=True)
class _Counters:
    enqueued: int = 0
    delivered: int = 0
    dropped: int = 0
    rejected: int = 0
    corrupt: int = 0
    failures: int = 0
    last_error: str | None = None
    last_success_ns: int | None = None
    backend_up: bool | None = None


def segment_name(number: int) -> str:
    return f"{SEGMENT_PREFIX}{number:020d}{SEGMENT_SUFFIX}"


class _SegmentStore:
    """The files: append, read from a position, drop the oldest. Not thread-safe; the owner locks."""

    def __init__(self, directory: Path, cap_bytes: int, segment_bytes: int) -> None:
        self.dir = directory
        self.cap_bytes = cap_bytes
        self.segment_bytes = segment_bytes
        private.private_dir(self.dir)
        self.segments: dict[int, int] = {}  # number -> size in bytes
        for path in self.dir.glob(f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}"):
            try:
                number = int(path.name[len(SEGMENT_PREFIX) : -len(SEGMENT_SUFFIX)])
            except ValueError:
                continue
            self.segments[number] = path.stat().st_size
        ack = self._read_ack()
        self.head = _Position(int(ack.get("segment", 0)), int(ack.get("offset", 0)))
        self.dropped_total = int(ack.get("dropped", 0))
        self.delivered_total = int(ack.get("delivered", 0))
        for number in [n for n in self.segments if n < self.head.segment]:
            self._unlink(number)  # fully delivered before a crash, not yet removed
        if not self.segments:
            self.tail = max(self.head.segment, 1)
            self.head = _Position(self.tail, 0)
            self.segments[self.tail] = 0
            private.create_private(self._path(self.tail))
        else:
            self.tail = max(self.segments)
            if self.head.segment not in self.segments:
                self.head = _Position(min(self.segments), 0)
            self._repair_tail()
        self._fd = self._open_tail()
        self.pending = self._count_pending()

    # -- files ------------------------------------------------------------------------------------------
    def _open_tail(self) -> int:
        return private.open_private(self._path(self.tail))

    def _path(self, number: int) -> Path:
        return self.dir / segment_name(number)

    def _unlink(self, number: int) -> None:
        self.segments.pop(number, None)
        with contextlib.suppress(FileNotFoundError):
            self._path(number).unlink()

    def _read_ack(self) -> dict[str, Any]:
        try:
            data = orjson.loads((self.dir / ACK_FILE).read_bytes())
        except FileNotFoundError:
            return {}
        except (orjson.JSONDecodeError, OSError) as exc:
            log.error("queue %s: unreadable %s (%s); starting at the oldest segment", self.dir, ACK_FILE, exc)
            return {}
        return data if isinstance(data, dict) else {}

    def write_ack(self) -> None:
        body = {
            "segment": self.head.segment,
            "offset": self.head.offset,
            "dropped": self.dropped_total,
            "delivered": self.delivered_total,
        }
        atomic_write(self.dir / ACK_FILE, orjson.dumps(body), mode=private.FILE_MODE)

    def _repair_tail(self) -> None:
        """Cut a torn last line (the process died inside a write)."""
        path = self._path(self.tail)
        size = self.segments[self.tail]
        if size == 0:
            return
        with open(path, "rb+") as fh:
            fh.seek(max(0, size - 1))
            if fh.read(1) == b"\n":
                return
            data = path.read_bytes()
            keep = data.rfind(b"\n") + 1
            log.warning("queue %s: cutting a torn last line (%d bytes)", self.dir, size - keep)
            fh.truncate(keep)
            self.segments[self.tail] = keep

    def _count_pending(self) -> int:
        total = 0
        for number in sorted(self.segments):
            with open(self._path(number), "rb") as fh:
                if number == self.head.segment:
                    fh.seek(self.head.offset)
                total += fh.read().count(b"\n")
        return total

    @property
    def total_bytes(self) -> int:
        return sum(self.segments.values())

    # -- operations ---------------------------------------------------------------------------------------
    def append(self, lines: bytes, count: int) -> None:
        """Append whole lines, fsync'd; on failure (a full disk) nothing of them stays in the segment."""
        size = self.segments[self.tail]
        try:
            written = 0
            while written < len(lines):
                written += os.write(self._fd, lines[written:])
            os.fsync(self._fd)
        except OSError:
            with contextlib.suppress(OSError):  # a torn tail left here is cut on the next start
                os.ftruncate(self._fd, size)
            raise
        self.segments[self.tail] += len(lines)
        self.pending += count
        if self.segments[self.tail] >= self.segment_bytes:
            with contextlib.suppress(OSError):  # no new segment now (full disk): the next append tries again
                self._rotate()

    def _rotate(self) -> None:
        fd = private.open_private(self._path(self.tail + 1))
        os.close(self._fd)
        self.tail += 1
        self.segments[self.tail] = 0
        self._fd = fd

    def enforce_cap(self) -> int:
        """Drop whole oldest segments while over the cap; return how many undelivered entries went."""
        dropped = 0
        while self.total_bytes > self.cap_bytes and len(self.segments) > 1:
            oldest = min(self.segments)
            with open(self._path(oldest), "rb") as fh:
                if oldest == self.head.segment:
                    fh.seek(self.head.offset)
                dropped += fh.read().count(b"\n")
            self._unlink(oldest)
            self.head = _Position(min(self.segments), 0)
        if dropped:
            self.pending -= dropped
            self.dropped_total += dropped
            self.write_ack()
        return dropped

    def read_batch(self, max_entries: int, max_bytes: int) -> tuple[list[bytes], int, int]:
        """Lines from the head (one segment at most): (lines, segment, end offset)."""
        self._skip_finished_segments()
        number = self.head.segment
        with open(self._path(number), "rb") as fh:
            fh.seek(self.head.offset)
            data = fh.read(max_bytes)
        lines: list[bytes] = []
        consumed = 0
        start = 0
        while len(lines) < max_entries:
            end = data.find(b"\n", start)
            if end < 0:
                break
            lines.append(data[start:end])
            start = end + 1
            consumed = start
        if not lines and data and len(data) >= max_bytes:
            # one line longer than max_bytes: read it whole
            with open(self._path(number), "rb") as fh:
                fh.seek(self.head.offset)
                line = fh.readline()
            if line.endswith(b"\n"):
                lines.append(line[:-1])
                consumed = len(line)
        return lines, number, self.head.offset + consumed

    def _skip_finished_segments(self) -> None:
        while self.head.segment < self.tail and self.head.offset >= self.segments.get(self.head.segment, 0):
            self._unlink(self.head.segment)
            self.head = _Position(min(self.segments), 0)

    def acknowledge(self, segment: int, end_offset: int, count: int, delivered: int) -> None:
        if segment != self.head.segment or end_offset <= self.head.offset:
            return  # the segment was dropped (cap) while the batch was out
        self.head = _Position(segment, end_offset)
        self.pending -= count
        self.delivered_total += delivered
        self._skip_finished_segments()
        try:
            self.write_ack()
        except OSError as exc:  # a full disk: the next acknowledgement writes it (a restart resends a little)
            log.warning("queue %s: cannot write %s: %s", self.dir, ACK_FILE, exc.strerror or exc)

    def close(self) -> None:
        os.close(self._fd)


class QueuedExporter:
    """Durable queue + ordered background delivery to ``inner`` (see module docstring)."""

    def __init__(
        self,
        inner: Exporter,
        dir: Path,  # noqa: A002 - the name the interface documents
        cap_bytes: int = DEFAULT_CAP_BYTES,
        options: QueueOptions | None = None,
        start: bool = True,
        poison: PoisonSink | None = None,
    ) -> None:
        self.inner = inner
        self.poison = poison or no_sink
        self.name = inner.name
        self.options = options or QueueOptions()
        segment_bytes = self.options.segment_bytes or max(4096, min(8 * 1024 * 1024, cap_bytes // 8))
        self._store = _SegmentStore(Path(dir), cap_bytes, segment_bytes)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._closed = False
        self._counters = _Counters(dropped=self._store.dropped_total, delivered=self._store.delivered_total)
        self._thread: threading.Thread | None = None
        self._ending = ""  # "asked": end_of_input waits for the thread to tell inner; "done": it did
        if self._store.pending:
            log.info("queue %s: %d entries left from a previous run", self.name, self._store.pending)
        if start:
            self.start()

    # -- the Exporter interface ------------------------------------------------------------------------------
    def export(self, batch: Sequence[Entry]) -> None:
        if not batch:
            return
        if self._closed:
            raise ExportError(f"{self.name}: queue is shut down", retryable=False)
        lines, count = self._serialise(batch)
        if not count:
            return
        with self._wake:
            try:
                self._store.append(lines, count)
            except OSError as exc:
                raise ExportError(f"{self.name}: cannot write queue: {exc}") from exc
            self._counters.enqueued += count
            dropped = self._store.enforce_cap()
            if dropped:
                self._counters.dropped += dropped
                log.error(
                    "queue %s over its cap of %d bytes: dropped the %d oldest entries (%d in total)",
                    self.name,
                    self._store.cap_bytes,
                    dropped,
                    self._counters.dropped,
                )
            self._wake.notify()

    def _serialise(self, batch: Sequence[Entry]) -> tuple[bytes, int]:
        """The batch as JSON lines; an entry that is not JSON (a lone surrogate, an object) is poison:
        counted, handed to the poison sink, and the rest goes on."""
        lines = []
        for entry in batch:
            try:
                lines.append(orjson.dumps(entry))
            except TypeError as exc:  # orjson.JSONEncodeError is one
                reason = f"not JSON-serialisable: {exc}"
                log.error("queue %s: entry %s refused at the door: %s", self.name, entry.get("event.id"), reason)
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
            self.inner.shutdown()  # also aborts an export blocked inside the SDK's own retries
        finally:
            if self._thread is not None:
                self._thread.join(timeout=30)
            with self._lock:
                self._store.close()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            c = self._counters
            out: dict[str, Any] = {
                "queued": self._store.pending,
                "queued_bytes": self._store.total_bytes,
                "cap_bytes": self._store.cap_bytes,
                "segments": len(self._store.segments),
                "enqueued": c.enqueued,
                "delivered": c.delivered,
                "dropped": c.dropped,
                "rejected": c.rejected,
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
            while self._store.pending > 0:
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
            return self._store.pending

    # -- delivery thread ---------------------------------------------------------------------------------
    def _run(self) -> None:
        backoff = 0.0
        least = 0.0  # the wait the backend asked for (Retry-After), at least
        batch: _Batch | None = None
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
                        if self._store.pending == 0 and not self._stopping.is_set():
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
                log.exception("queue %s: unexpected error from %s", self.name, type(self.inner).__name__)
                if batch is not None:
                    batch.attempts += 1
                    if batch.attempts >= self.options.max_unexpected_failures:
                        self._reject(batch, f"unexpected error: {exc!r}")
                        batch = None
                backoff = self._failed(exc, backoff)

    def _next_batch(self) -> _Batch | None:
        with self._lock:
            if self._store.pending <= 0:
                return None
            lines, segment, end = self._store.read_batch(self.options.max_batch, self.options.max_batch_bytes)
            if not lines and end == self._store.head.offset:
                return None
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
                log.error("queue %s: skipping a corrupt line (%d bytes)", self.name, len(line))
        return _Batch(entries, segment, end, len(lines))

    def _is_stale(self, batch: _Batch) -> bool:
        with self._lock:
            return batch.segment != self._store.head.segment

    def _deliver(self, batch: _Batch) -> None:
        if batch.entries:
            self.inner.export(batch.entries)
        self._commit(batch, delivered=len(batch.entries))
        with self._lock:
            self._counters.last_success_ns = time.time_ns()
            if self._counters.backend_up is False:
                log.info("queue %s: backend reachable again", self.name)
            self._counters.backend_up = True

    def _commit(self, batch: _Batch, delivered: int) -> None:
        with self._wake:
            self._store.acknowledge(batch.segment, batch.end_offset, batch.lines, delivered)
            self._counters.delivered = self._store.delivered_total
            self._wake.notify_all()

    def _reject(self, batch: _Batch, reason: str) -> None:
        log.error(
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
            log.warning("queue %s: delivery failed, retrying with backoff: %s", self.name, exc)
        else:
            log.debug("queue %s: still failing: %s", self.name, exc)
        if backoff <= 0:
            return self.options.backoff_initial
        return min(backoff * 2, self.options.backoff_max)
