"""File events between the daemon's loop and the delivery worker: the watch task (on the loop) turns
watchfiles' events into a wake and the paths they named (``ChangeSet``); the worker turns those into what
each cycle's file sources read (a ``Scope``) and publishes the directories to watch after every cycle, so
the watch task never touches a source."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from collector.config import Config
from collector.daemon.change_set import ChangeSet
from collector.daemon.wake_filter import WakeFilter
from collector.sources.base import Narrowable, Scope, Source

log = logging.getLogger("collector")  # the daemon's lines, as the Service's


@dataclass(slots=True)
class FileEvents:
    """Owns what the file events told: the directories watched (``dirs``, published by the worker, read
    by the watch task), the paths named since the last cycle (``changes``) and when a cycle last swept
    the file sources (``swept_at``, monotonic)."""

    config: Config  # its collector.poll_interval_s and collector.rescan_s
    dirs: list[str] = field(default_factory=list)
    changes: ChangeSet = field(default_factory=ChangeSet)
    swept_at: float = -float("inf")

    def publish(self, sources: Sequence[Source]) -> None:
        """The worker: the directories of ``sources`` that exist now are the ones to watch."""
        self.dirs = sorted({d for s in sources for d in s.watch_paths() if os.path.isdir(d)})

    def narrow(self, sources: Sequence[Source], everything: bool) -> None:
        """What the file sources read this cycle: every file when asked (``collect --once``), when file
        events are not delivered or may have been missed (``ChangeSet``); else the files events named,
        plus, every ``poll_interval_s``, a sweep: folders whose mtime moved are listed again and a
        ``poll_interval_s / rescan_s`` share of the files is stat-ed, so that each is checked within
        ``rescan_s`` even if its event was lost."""
        changed, full = self.changes.take()
        col = self.config.collector
        now = time.monotonic()
        scope: Scope | None = None
        if everything or full or not self.changes.watching:
            self.swept_at = now
        else:
            due = now - self.swept_at >= 0.9 * col.poll_interval_s  # the wait ends a little early, never late
            self.swept_at = now if due else self.swept_at
            scope = Scope(changed, min(1.0, col.poll_interval_s / col.rescan_s) if due else 0.0)
        for source in sources:
            if isinstance(source, Narrowable):
                source.narrow(scope)

    async def watch(self, stop: threading.Event, wake: threading.Event) -> None:
        """The watch task: until ``stop``, every event sets ``wake`` and its paths go to ``changes``; new
        directories (``dirs`` changed) restart the watch."""
        import watchfiles

        while not stop.is_set():
            dirs = self.dirs
            if not dirs:
                self.changes.watch(False)
                await asyncio.sleep(1)
                continue
            try:
                async for changes in watchfiles.awatch(*dirs, debounce=20, step=10, stop_event=stop,
                                                       rust_timeout=1000, yield_on_timeout=True,
                                                       watch_filter=WakeFilter()):
                    if not self.changes.watching:  # the first yield: the watch is set up; a cycle
                        self.changes.watch(True)  # reads every file, for what came before it
                        wake.set()
                    if changes:  # a timeout yields nothing: it only lets the directories be checked
                        self.changes.add(path for _, path in changes)
                        wake.set()
                    if self.dirs != dirs:
                        break  # new directories appeared: watch them too
            except (OSError, RuntimeError) as exc:
                log.warning("file events unavailable (%s); polling only", exc)
                self.changes.watch(False)
                await asyncio.sleep(5)
            self.changes.watch(False)  # until the new watch is set up
