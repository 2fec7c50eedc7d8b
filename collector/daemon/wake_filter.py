"""Which file events wake the daemon: not those our own reads cause.

Reading an agent's SQLite database touches its ``-shm`` file (the readers' marks) and a rollback
``-journal`` comes and goes around the agent's own writes to the database file, which wake us anyway; a
``-wal`` file counts only when its size or mtime moved (the agent committed), not on our reads of it (one
first seen counts when it changed since the filter began watching). Every other event wakes the daemon;
the poll (``collector.poll_interval_s``) is the safety net.
"""

from __future__ import annotations

import os
import time
from typing import Any

_IGNORED = ("-shm", "-journal")


class WakeFilter:
    """A ``watchfiles`` filter: ``(change, path) -> wake?``."""

    def __init__(self) -> None:
        self._wal: dict[str, tuple[int, int] | None] = {}  # -wal path -> (size, mtime) last seen
        self._since_ns = time.time_ns() - 1_000_000_000  # a -wal first seen counts if it moved after this

    def __call__(self, change: Any, path: str) -> bool:
        if path.endswith(_IGNORED):
            return False
        if not path.endswith("-wal"):
            return True
        try:
            st = os.stat(path)
            stamp: tuple[int, int] | None = (st.st_size, st.st_mtime_ns)
        except OSError:
            stamp = None
        known = path in self._wal
        if known and self._wal[path] == stamp:
            return False
        self._wal[path] = stamp
        return known or stamp is None or stamp[1] >= self._since_ns
