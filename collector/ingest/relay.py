"""The spool relay: posted hooks reach the spool through one writer thread, and a hook is answered only
once its line is on disk.

Group commit: the writer takes everything that arrived while its previous write was running, writes
each agent file's lines with one synchronous ``write`` (the file is opened ``O_DSYNC``: the write returns
once the data is on disk, one system call where ``write`` + ``fdatasync`` are two), then settles every
waiting request of the group with one hand-over to the event loop (many requests, one disk flush, one
wake-up of the loop). The event loop never blocks on the disk and never waits behind a pipeline batch.
Each hand-over between threads costs a wait for the GIL while the delivery worker parses (up to the
interpreter's 5 ms switch interval), so the path from request to answer keeps them few: the loop queues
the line and its future, the writer wakes, writes, and calls the loop back once. The relay cannot die
silently: a failed write is logged, counted and answered with an error (the server says 500); a writer
thread that stopped anyway is restarted by the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from dataclasses import dataclass
from typing import Any

from collector.sources.spool_writer import SpoolWriter

log = logging.getLogger(__name__)

MAX_GROUP = 1024  # lines per group commit


class RelayFull(RuntimeError):
    """The writer is ``capacity`` lines behind (the server answers 503)."""


class SpoolWriteFailed(RuntimeError):
    """The line could not be made durable (the server answers 500)."""


@dataclass(slots=True)
class _Pending:
    agent: str
    line: bytes
    future: asyncio.Future[None]
    loop: asyncio.AbstractEventLoop


def _settle(futures: list[asyncio.Future[None]], error: BaseException | None) -> None:
    """On the event loop: answer every request of one group commit."""
    failed = None if error is None else f"the hook could not be written to the spool: {error}"
    for future in futures:
        if future.done():  # the client went away and the request was cancelled
            continue
        if failed is None:
            future.set_result(None)
        else:
            future.set_exception(SpoolWriteFailed(failed))


def _settle_group(group: list[_Pending], error: BaseException | None) -> None:
    """From the writer thread: one call into each requesting loop (the daemon has one) per group."""
    by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    for pending in group:
        by_loop.setdefault(pending.loop, []).append(pending.future)
    for loop, futures in by_loop.items():
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, futures, error)


class SpoolRelay:
    def __init__(self, writer: SpoolWriter, capacity: int = 10_000) -> None:
        self._writer = writer
        self._queue: queue.Queue[_Pending | None] = queue.Queue(capacity)
        self._lock = threading.Lock()
        self._closed = False
        self.written = 0
        self.failed = 0
        self.groups = 0
        self.restarts = 0
        self._thread = self._spawn()

    def _spawn(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="spool-relay", daemon=True)
        thread.start()
        return thread

    def _ensure_writer(self) -> None:
        with self._lock:
            if self._closed or self._thread.is_alive():
                return
            self.restarts += 1
            log.error("the spool relay's writer thread had stopped; restarted it (restart %d)", self.restarts)
            self._thread = self._spawn()

    # -- the event loop's side ---------------------------------------------------------------------

    def submit(self, agent: str, event: str, payload: Any, received: float,
               folder: str | None = None) -> asyncio.Future[None]:
        """Queue one hook; the future resolves when its line is durable (or fails with
        :class:`SpoolWriteFailed`). Raises ``orjson.JSONEncodeError`` for a payload that cannot be stored
        and :class:`RelayFull` when the writer is too far behind. ``folder``: the spool folder when it is
        not the agent's (the OTLP receiver's ``otlp/<agent>``). Call from the event loop."""
        return self.submit_line(folder or agent, SpoolWriter.line(agent, event, payload, received))

    def submit_line(self, folder: str, line: bytes) -> asyncio.Future[None]:
        """Queue a line made already (:meth:`SpoolWriter.line`) for the spool folder ``folder``."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._ensure_writer()
        try:
            self._queue.put_nowait(_Pending(folder, line, future, loop))
        except queue.Full:
            raise RelayFull("the spool writer is behind") from None
        return future

    def stats(self) -> dict[str, int]:
        return {"written": self.written, "failed": self.failed, "group_commits": self.groups,
                "writer_restarts": self.restarts, "queued": self._queue.qsize()}

    def flush(self) -> None:
        """Block until every line queued so far is written (tests, shutdown)."""
        self._queue.join()

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued, then stop."""
        with self._lock:
            self._closed = True
        self._queue.put(None)
        self._thread.join(timeout)

    # -- the writer thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            group, stop = self._gather(first)
            try:
                if group:
                    self._commit(group)
            finally:
                for _ in range(len(group) + stop):
                    self._queue.task_done()
            if stop:
                return

    def _gather(self, first: _Pending | None) -> tuple[list[_Pending], bool]:
        if first is None:
            return [], True
        group = [first]
        while len(group) < MAX_GROUP:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                return group, True
            group.append(item)
        return group, False

    def _commit(self, group: list[_Pending]) -> None:
        try:
            self._writer.write_lines([(p.agent, p.line) for p in group])
        except BaseException as exc:
            self.failed += len(group)
            log.error("cannot append %d posted hook(s) to the spool: %s", len(group),
                      getattr(exc, "strerror", None) or repr(exc))
            _settle_group(group, exc)
            if not isinstance(exc, Exception):
                raise  # the thread ends; the next request restarts it
            return
        self.written += len(group)
        self.groups += 1
        _settle_group(group, None)
