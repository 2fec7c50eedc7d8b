"""The files of a durable queue: append-only segments written once, read by one or more consumers.

One :class:`SegmentLog` per directory holds the entries as JSON lines in numbered segment files; each
consumer (a signal of an OTLP backend: logs, traces, metrics) has a :class:`Cursor`, its own acknowledged
position (segment + byte offset) kept in ``ack-<consumer>.json`` (``ack.json`` for a queue with one
unnamed consumer). A segment is deleted once every cursor has passed it. Not thread-safe: the owner holds
``lock`` around every call.

Appends are whole lines, one ``write`` and one ``fsync`` per batch for all consumers together. Cursor
positions move in memory as batches are delivered and reach the disk after every acknowledged batch by
default (``ack_every`` = 1: right after the backend's 2xx), else by time or count (``ack_interval_s``,
``ack_every``), when the consumer goes idle, and at shutdown: a ``kill -9`` resends at most the one batch
whose 2xx came just before it (at-least-once; entries keep their deterministic ids). A consumer with state
of its own (the trace exporter's open turns, the metric exporter's cumulative series) saves it in
``before_save(position)``, just before the ack file, *with* that position: the state and the position
that produced it are one write, and on start (:meth:`SegmentLog.resume`) a consumer whose state is ahead
of its ack file (a kill between the two writes) resumes from the state's position.

``recent_ids()`` are the event ids of the newest :data:`RECENT_SCAN_BYTES` of the log as a restart found
them: the entries of the batch whose source checkpoint had not committed yet when the process died come
back from their sources with the same ids, and the queue does not append them again.

When the log holds more than ``cap_bytes``, whole segments are dropped from the oldest end; the entries
a cursor had not delivered in them are counted as its ``dropped``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from collector.model.entry import delivery_id
from collector.util import private
from collector.util.atomic import atomic_write

log = logging.getLogger(__name__)

ACK_FILE = "ack.json"
SEGMENT_PREFIX = "seg-"
SEGMENT_SUFFIX = ".jsonl"
RECENT_SCAN_BYTES = 8 * 1024 * 1024  # the newest bytes of the log read back for their ids on start


def _event_id(line: bytes) -> list[str]:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return []
    eid = delivery_id(value)
    return [eid] if eid is not None else []


def segment_name(number: int) -> str:
    return f"{SEGMENT_PREFIX}{number:020d}{SEGMENT_SUFFIX}"


def ack_name(consumer: str) -> str:
    return f"ack-{consumer}.json" if consumer else ACK_FILE


@dataclass(slots=True)
class Position:
    segment: int
    offset: int


@dataclass(slots=True)
class Cursor:
    """One consumer's progress through the log."""

    name: str
    path: Path
    head: Position
    dropped_total: int = 0
    delivered_total: int = 0
    pending: int = 0
    unsaved: int = 0  # batches acknowledged in memory, not yet in the ack file
    saved_at: float | None = None  # monotonic; None: not written by this process yet (the first ack writes)
    before_save: Callable[[Position], None] | None = None  # the consumer's own state first, with the position

    def save(self) -> None:
        if self.before_save is not None:
            try:
                self.before_save(self.head)
            except Exception as exc:  # noqa: BLE001 - then the position stays where the state is
                log.warning("queue %s: %s not saved, position kept: %r", self.path.parent, self.name, exc)
                return
        body = {"segment": self.head.segment, "offset": self.head.offset, "dropped": self.dropped_total,
                "delivered": self.delivered_total}
        try:
            atomic_write(self.path, orjson.dumps(body), mode=private.FILE_MODE)
        except OSError as exc:  # a full disk: the next acknowledgement writes it (a restart resends a little)
            log.warning("queue %s: cannot write %s: %s", self.path.parent, self.path.name, exc.strerror or exc)
            return
        self.unsaved = 0
        self.saved_at = time.monotonic()


class SegmentLog:
    def __init__(self, directory: Path, cap_bytes: int, segment_bytes: int, consumers: list[str],
                 ack_interval_s: float = 1.0, ack_every: int = 1) -> None:
        self.dir = directory
        self.cap_bytes = cap_bytes
        self.segment_bytes = segment_bytes
        self.ack_interval_s = ack_interval_s
        self.ack_every = ack_every
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        private.private_dir(self.dir)
        self.segments: dict[int, int] = {}  # number -> size in bytes
        for path in self.dir.glob(f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}"):
            try:
                number = int(path.name[len(SEGMENT_PREFIX) : -len(SEGMENT_SUFFIX)])
            except ValueError:
                continue
            self.segments[number] = path.stat().st_size
        self.cursors = {name: self._load_cursor(name) for name in consumers}
        self._open_segments()
        self._fd = private.open_private(self._path(self.tail))
        for cursor in self.cursors.values():
            cursor.pending = self._count_from(cursor.head)
        self._last_key: tuple[int, ...] | None = None
        self._last_count = 0
        self._claimed: set[str] = set()
        self._open = set(consumers)
        self.parsed: dict[tuple[int, int], tuple[int, int, list[Any]]] = {}  # (segment, offset) -> batch
        self._recent: set[str] | None = None
        self.recent_ids()  # now, before delivery removes a segment

    def recent_ids(self) -> set[str]:
        """The event ids in the newest ``RECENT_SCAN_BYTES`` of the log when it was opened (see the module
        docstring); the caller removes those it meets again."""
        if self._recent is None:
            self._recent = set()
            left = RECENT_SCAN_BYTES
            for number in sorted(self.segments, reverse=True):
                if left <= 0:
                    break
                size = self.segments[number]
                with open(self._path(number), "rb") as fh:
                    fh.seek(max(0, size - left))
                    data = fh.read(min(size, left))
                left -= size
                lines = data.split(b"\n")
                if size > len(data):  # read from inside the segment: the first line may be cut
                    lines = lines[1:]
                for line in lines:
                    self._recent.update(_event_id(line))
        return self._recent

    def resume(self, cursor: Cursor, position: Any) -> None:
        """Start ``cursor`` at ``position`` (a consumer's saved state: ``{"segment", "offset"}``) when that
        is ahead of its ack file and still in the log."""
        if not isinstance(position, dict):
            return
        try:
            where = Position(int(position["segment"]), int(position["offset"]))
        except (KeyError, TypeError, ValueError):
            return
        if (where.segment, where.offset) <= (cursor.head.segment, cursor.head.offset):
            return
        if where.segment not in self.segments or where.offset > self.segments[where.segment]:
            return
        log.info("queue %s: %s resumes at its saved state's position %d:%d (its ack file said %d:%d)", self.dir,
                 cursor.name or "queue", where.segment, where.offset, cursor.head.segment, cursor.head.offset)
        cursor.head = where
        cursor.pending = self._count_from(where)

    # -- start-up -----------------------------------------------------------------------------------------
    def _load_cursor(self, name: str) -> Cursor:
        path = self.dir / ack_name(name)
        try:
            data: Any = orjson.loads(path.read_bytes())
        except FileNotFoundError:
            data = {}
        except (orjson.JSONDecodeError, OSError) as exc:
            log.error("queue %s: unreadable %s (%s); starting at the oldest segment", self.dir, path.name, exc)
            data = {}
        data = data if isinstance(data, dict) else {}
        head = Position(int(data.get("segment", 0)), int(data.get("offset", 0)))
        return Cursor(name, path, head, int(data.get("dropped", 0)), int(data.get("delivered", 0)))

    def _open_segments(self) -> None:
        lowest = min((c.head.segment for c in self.cursors.values()), default=0)
        for number in [n for n in self.segments if n < lowest]:
            self._unlink(number)  # delivered by every consumer before a crash, not yet removed
        if not self.segments:
            self.tail = max(lowest, max((c.head.segment for c in self.cursors.values()), default=0), 1)
            self.segments[self.tail] = 0
            private.create_private(self._path(self.tail))
            for cursor in self.cursors.values():
                cursor.head = Position(self.tail, 0)
            return
        self.tail = max(self.segments)
        for cursor in self.cursors.values():
            if cursor.head.segment not in self.segments:
                cursor.head = Position(min(self.segments), 0)
        self._repair_tail()

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
            keep = path.read_bytes().rfind(b"\n") + 1
            log.warning("queue %s: cutting a torn last line (%d bytes)", self.dir, size - keep)
            fh.truncate(keep)
            self.segments[self.tail] = keep

    def _count_from(self, head: Position) -> int:
        total = 0
        for number in sorted(n for n in self.segments if n >= head.segment):
            with open(self._path(number), "rb") as fh:
                if number == head.segment:
                    fh.seek(head.offset)
                total += fh.read().count(b"\n")
        return total

    # -- files ----------------------------------------------------------------------------------------------
    def _path(self, number: int) -> Path:
        return self.dir / segment_name(number)

    def _unlink(self, number: int) -> None:
        self.segments.pop(number, None)
        for start in [k for k in self.parsed if k[0] == number]:
            del self.parsed[start]
        with contextlib.suppress(FileNotFoundError):
            self._path(number).unlink()

    @property
    def total_bytes(self) -> int:
        return sum(self.segments.values())

    # -- writing --------------------------------------------------------------------------------------------
    def claim(self, consumer: str, key: tuple[int, ...]) -> int | None:
        """If the batch ``key`` was just appended for a sibling consumer and not yet claimed by this one,
        it is already in the log (one write for all consumers): the number of lines it added; else None."""
        if key == self._last_key and consumer not in self._claimed:
            self._claimed.add(consumer)
            return self._last_count
        return None

    def append(self, lines: bytes, count: int, consumer: str = "", key: tuple[int, ...] | None = None) -> None:
        """Append whole lines, fsync'd; on failure (a full disk) nothing of them stays in the segment."""
        if not lines:
            self._last_key, self._last_count, self._claimed = key, 0, {consumer}
            return
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
        self._last_key, self._last_count, self._claimed = key, count, {consumer}
        self.segments[self.tail] += len(lines)
        for cursor in self.cursors.values():
            cursor.pending += count
        if self.segments[self.tail] >= self.segment_bytes:
            with contextlib.suppress(OSError):  # no new segment now (full disk): the next append tries again
                fd = private.open_private(self._path(self.tail + 1))
                os.close(self._fd)
                self.tail += 1
                self.segments[self.tail] = 0
                self._fd = fd

    def enforce_cap(self) -> dict[str, int]:
        """Drop whole oldest segments while over the cap; return the undelivered entries lost per cursor."""
        dropped: dict[str, int] = {}
        while self.total_bytes > self.cap_bytes and len(self.segments) > 1:
            oldest = min(self.segments)
            with open(self._path(oldest), "rb") as fh:
                data = fh.read()
            self._unlink(oldest)
            for cursor in self.cursors.values():
                if cursor.head.segment != oldest:
                    continue
                lost = data[cursor.head.offset :].count(b"\n")
                cursor.pending -= lost
                cursor.dropped_total += lost
                dropped[cursor.name] = dropped.get(cursor.name, 0) + lost
                cursor.head = Position(min(self.segments), 0)
        for name in dropped:
            self.cursors[name].save()
        return dropped

    # -- reading ----------------------------------------------------------------------------------------------
    def read_batch(self, cursor: Cursor, max_entries: int, max_bytes: int) -> tuple[list[bytes], int, int]:
        """Lines from the cursor (one segment at most): (lines, segment, end offset)."""
        self._skip_finished(cursor)
        number, offset = cursor.head.segment, cursor.head.offset
        with open(self._path(number), "rb") as fh:
            fh.seek(offset)
            data = fh.read(max_bytes)
        lines: list[bytes] = []
        start = consumed = 0
        while len(lines) < max_entries:
            end = data.find(b"\n", start)
            if end < 0:
                break
            lines.append(data[start:end])
            start = consumed = end + 1
        if not lines and data and len(data) >= max_bytes:  # one line longer than max_bytes: read it whole
            with open(self._path(number), "rb") as fh:
                fh.seek(offset)
                line = fh.readline()
            if line.endswith(b"\n"):
                lines.append(line[:-1])
                consumed = len(line)
        return lines, number, offset + consumed

    def keep_parsed(self, start: tuple[int, int], batch: tuple[int, int, list[Any]]) -> None:
        """A batch one consumer parsed, for the others that reach the same position: (end offset, lines,
        entries). Only the last few are kept, and only while another consumer may still read them."""
        if len(self.cursors) < 2:
            return
        if len(self.parsed) >= 2 * len(self.cursors):
            del self.parsed[next(iter(self.parsed))]
        self.parsed[start] = batch

    def _skip_finished(self, cursor: Cursor) -> None:
        while cursor.head.segment < self.tail and cursor.head.offset >= self.segments.get(cursor.head.segment, 0):
            cursor.head = Position(min(n for n in self.segments if n > cursor.head.segment), 0)
        lowest = min(c.head.segment for c in self.cursors.values())
        for number in [n for n in self.segments if n < lowest]:
            self._unlink(number)

    def acknowledge(self, cursor: Cursor, segment: int, end_offset: int, count: int, delivered: int) -> None:
        if segment != cursor.head.segment or end_offset <= cursor.head.offset:
            return  # the segment was dropped (cap) while the batch was out
        cursor.head = Position(segment, end_offset)
        cursor.pending -= count
        cursor.delivered_total += delivered
        cursor.unsaved += 1
        self._skip_finished(cursor)
        if cursor.unsaved >= self.ack_every or self._due(cursor):
            cursor.save()

    def save_if_due(self, cursor: Cursor) -> None:
        """Write the cursor's position if it moved and ``ack_interval_s`` passed (the consumer is idle)."""
        if cursor.unsaved and self._due(cursor):
            cursor.save()

    def _due(self, cursor: Cursor) -> bool:
        """``ack_interval_s`` passed since the cursor was last written (or it never was by this process:
        time.monotonic() starts near zero on a freshly booted machine, so no "since 0" here)."""
        return cursor.saved_at is None or time.monotonic() - cursor.saved_at >= self.ack_interval_s

    def close(self, consumer: str) -> None:
        """The consumer stops: its position is written; the file closes with the last consumer."""
        cursor = self.cursors[consumer]
        if cursor.unsaved:
            cursor.save()
        if consumer in self._open:
            self._open.discard(consumer)
            if not self._open:
                os.close(self._fd)
