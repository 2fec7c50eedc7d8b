"""Append hook envelopes to the spool from inside the daemon (the HTTP ingest path).

The daemon writes its own file per agent and day (``<agent>-YYYY-MM-DD.http.jsonl``) so it never
shares a file with the hook script's writers; the spool source reads both.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import orjson

from collector.util.private import open_private, private_dir


class SpoolWriter:
    def __init__(self, spool_dir: Path, fsync: bool = True) -> None:
        self.spool_dir = spool_dir
        self.fsync = fsync
        self._fds: dict[str, tuple[str, int]] = {}

    def append(self, agent: str, event: str, payload: Any, received: float | None = None) -> None:
        line = orjson.dumps({"ts": received or time.time(), "agent": agent, "event": event, "payload": payload})
        fd = self._fd(agent)
        os.write(fd, line + b"\n")
        if self.fsync:
            os.fdatasync(fd)

    def _fd(self, agent: str) -> int:
        day = time.strftime("%Y-%m-%d", time.gmtime())
        current = self._fds.get(agent)
        if current and current[0] == day:
            return current[1]
        if current:
            os.close(current[1])
        directory = self.spool_dir / agent
        private_dir(directory)
        fd = open_private(directory / f"{agent}-{day}.http.jsonl")
        self._fds[agent] = (day, fd)
        return fd

    def close(self) -> None:
        for _, fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
