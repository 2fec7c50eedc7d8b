"""Append hook envelopes to the spool from inside the daemon (the HTTP ingest path).

The daemon writes its own file per agent and day (``<agent>-YYYY-MM-DD.http.jsonl``) so it never
shares a file with the hook script's writers; the spool source reads both. A folder key with a ``/``
(``otlp/<agent>``, the OTLP receiver's requests) writes ``<spool>/otlp/<agent>/<agent>-YYYY-MM-DD.http.jsonl``,
which the hook spool's glob (``<spool>/<agent>/*.jsonl``) does not see; retention treats it as the
daemon's own file (emptied under this writer's lock once committed, deleted the next day).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from collector.util.private import open_private, private_dir


class SpoolWriter:
    """The daemon's one relay thread writes; the housekeeping may empty a committed file meanwhile
    (:meth:`empty_if_committed`): a lock keeps the two apart."""

    def __init__(self, spool_dir: Path, fsync: bool = True) -> None:
        self.spool_dir = spool_dir
        self.fsync = fsync
        self._fds: dict[str, tuple[str, int]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def line(agent: str, event: str, payload: Any, received: float | None = None) -> bytes:
        """One envelope line (raises ``orjson.JSONEncodeError`` for what cannot be stored, e.g. nested too
        deep): made before the line is queued, so a bad payload fails alone."""
        return orjson.dumps({"ts": received or time.time(), "agent": agent, "event": event,
                             "payload": payload}) + b"\n"

    def append(self, agent: str, event: str, payload: Any, received: float | None = None) -> None:
        self.write_lines([(agent, self.line(agent, event, payload, received))])

    def write_lines(self, lines: Sequence[tuple[str, bytes]]) -> None:
        """Group commit: the lines of each agent's file in one write to a file opened ``O_DSYNC`` (the
        write returns once the data is on disk, as write + fdatasync would, in one system call); when this
        returns, every line is on disk. A short write is continued; on an error (OSError, raised) the
        file is cut back to where it was, so no torn line is left."""
        by_agent: dict[str, list[bytes]] = {}
        for agent, data in lines:
            by_agent.setdefault(agent, []).append(data)
        with self._lock:
            self._write_groups(by_agent)

    def _write_groups(self, by_agent: dict[str, list[bytes]]) -> None:
        for agent, chunks in by_agent.items():
            fd = self._fd(agent)
            data = b"".join(chunks)
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(fd, view):]
            except OSError:
                written = len(data) - len(view)
                with contextlib.suppress(OSError):  # no torn line for the next write to continue
                    os.ftruncate(fd, os.fstat(fd).st_size - written)
                raise

    def _fd(self, agent: str) -> int:
        day = time.strftime("%Y-%m-%d", time.gmtime())
        current = self._fds.get(agent)
        if current and current[0] == day:
            return current[1]
        if current:
            os.close(current[1])
        directory = self.spool_dir / agent
        private_dir(directory)  # every folder it makes 0700, otlp/ too
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | (os.O_DSYNC if self.fsync else 0)
        fd = open_private(directory / f"{agent.rpartition('/')[2]}-{day}.http.jsonl", flags)
        self._fds[agent] = (day, fd)
        return fd

    def empty_if_committed(self, path: Path, ino: int, committed: int) -> bool:
        """Truncate our own spool file to nothing if it still is the file the checkpoint knows (``ino``)
        and every byte of it is committed downstream; no line can be appended meanwhile."""
        with self._lock:
            try:
                fd = open_private(path, os.O_WRONLY)
            except OSError:
                return False
            try:
                st = os.fstat(fd)
                if st.st_ino != ino or st.st_size != committed or committed == 0:
                    return False
                os.ftruncate(fd, 0)
                os.fsync(fd)
                return True
            finally:
                os.close(fd)

    def close(self) -> None:
        for _, fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
