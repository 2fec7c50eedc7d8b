"""What the daemon cleans up on a timer: ``[retention]`` (committed spool files, old outputs, quarantine
files, logs) and the dedupe ids and saved sessions older than ``collector.seen_retention_days``."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from collector.config import Config
from collector.paths import Paths
from collector.pipeline.quarantine import quarantine_dir
from collector.sources.base import Source
from collector.sources.jsonl_files import JsonlFiles
from collector.sources.spool_writer import SpoolWriter
from collector.state import retention
from collector.state.checkpoints import CheckpointStore, Commit

log = logging.getLogger("collector")  # the daemon's lines, as the Service's
HOUSEKEEP_EVERY_S = 60.0  # how often the daemon applies [retention] (spool, outputs, quarantine, logs)
PRUNE_EVERY_S = 3600.0  # how often the daemon forgets dedupe ids older than collector.seen_retention_days


@dataclass(slots=True)
class Housekeeping:
    """Owns both clean-ups and when each last ran (monotonic): ``[retention]`` every HOUSEKEEP_EVERY_S
    (the first at the first cycle), the dedupe ids and sessions at start-up, then every PRUNE_EVERY_S."""

    config: Config
    paths: Paths
    output_dir: Path
    store: CheckpointStore
    spool_writer: SpoolWriter
    housekept_at: float | None = None
    pruned_at: float = 0.0

    def housekeeping_due(self) -> bool:
        return self.housekept_at is None or time.monotonic() - self.housekept_at >= HOUSEKEEP_EVERY_S

    def housekeep(self, sources: Sequence[Source], now: float | None = None) -> None:
        """Apply ``[retention]``: committed spool files go (and the file sources forget their positions),
        old outputs, quarantine files and logs too."""
        self.housekept_at = time.monotonic()
        keep = self.config.retention
        try:
            sweep = retention.sweep_spool(self.store.positions(), self.paths.spool_dir, self.spool_writer,
                                          keep.spool_grace_s, now)
            if sweep.forget:
                self.store.commit(Commit(forget=sweep.forget))
                for source in sources:
                    if isinstance(source, JsonlFiles):
                        source.forget(sweep.forget)
            gone = retention.prune_outputs(self.output_dir, keep.output_days, keep.output_max_mb, now)
            gone += retention.prune_idle_files(sorted(quarantine_dir(self.paths).glob("*.jsonl*")),
                                               keep.quarantine_days, now)
            gone += retention.cap_logs(self.paths.data_dir / "log", keep.log_max_mb, keep.log_days, now)
        except (OSError, sqlite3.Error) as exc:
            log.warning("housekeeping failed (next time again): %s", exc)
            return
        if sweep.deleted or sweep.emptied or sweep.swept or gone:
            log.info("retention: %d committed spool files deleted, %d emptied, %d renamed aside; %d old files "
                     "removed", len(sweep.deleted), len(sweep.emptied), len(sweep.swept), len(gone))

    def prune_due(self) -> bool:
        return time.monotonic() - self.pruned_at >= PRUNE_EVERY_S

    def prune_seen(self) -> None:
        """Dedupe ids (and saved sessions) expire after ``collector.seen_retention_days``."""
        self.pruned_at = time.monotonic()
        days = self.config.collector.seen_retention_days
        try:
            gone = self.store.prune_seen(days * 86400.0)
            self.store.prune_sessions(days * 86400.0)
        except sqlite3.Error as exc:  # a full disk: next time
            log.warning("cannot prune the dedupe ids: %s", exc)
            return
        if gone:
            log.info("forgot %d dedupe ids older than %d days", gone, days)
