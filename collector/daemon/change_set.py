"""The paths file events named, handed from the file-event task (on the daemon's loop) to the delivery
worker together with the wake. ``take`` says which paths changed since the last cycle and whether the
next cycle must look at every file instead: the first one, one after the watcher (re)started (what
happened before it watched is not in any event), one after more than ``MAX_PATHS`` paths (a burst is
cheaper walked than listed) and one after a cycle that stopped early (a held batch: the paths it did not
reach were taken already).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

MAX_PATHS = 20_000


class ChangeSet:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paths: set[str] = set()
        self._everything = True  # the first cycle reads every file
        self._watching = False

    @property
    def watching(self) -> bool:
        """File events are being delivered (False: the watcher is down or not started; poll everything)."""
        with self._lock:
            return self._watching

    @property
    def settled(self) -> bool:
        """File events are delivered and no full pass is due: the next cycle reads only what they name."""
        with self._lock:
            return self._watching and not self._everything

    def watch(self, on: bool) -> None:
        with self._lock:
            if on and not self._watching:
                self._everything = True
            self._watching = on

    def add(self, paths: Iterable[str]) -> None:
        with self._lock:
            if not self._everything:
                self._paths.update(paths)
                if len(self._paths) > MAX_PATHS:
                    self._everything, self._paths = True, set()

    def everything(self) -> None:
        with self._lock:
            self._everything, self._paths = True, set()

    def take(self) -> tuple[frozenset[str], bool]:
        """(the paths named since the last take, whether to read every file instead)."""
        with self._lock:
            paths, everything = frozenset(self._paths), self._everything
            self._paths, self._everything = set(), False
            return paths, everything
