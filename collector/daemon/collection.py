"""The way of a batch in a cycle: read from a source, through the pipeline, to every exporter, then
committed (``collector.daemon.delivery``); also the batches that wait (one an exporter refused, records and
entries a ``quarantine retry`` asked for) and the entries the idle rule makes. The Service decides the
order within a cycle (``Service.collect_once``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from collector.config import Config
from collector.daemon.delivery import Delivery
from collector.daemon.event_counts import KEY as COUNTS_KEY
from collector.daemon.event_counts import EventCounts
from collector.daemon.followed_paths import FollowedPaths
from collector.daemon.idle_rule import IdleRule
from collector.daemon.session_state import SessionState
from collector.model import RawRecord
from collector.pipeline.processor import Pipeline
from collector.pipeline.quarantine import DueEntry
from collector.sources.base import Position, Source
from collector.state.checkpoints import Commit

log = logging.getLogger("collector")  # the daemon's lines, as the Service's
Progress = Callable[[str, int], None]  # (source name, records so far)


@dataclass(slots=True)
class CycleResult:
    records: int = 0
    entries: int = 0
    batches: int = 0
    by_agent: dict[str, int] = field(default_factory=dict)
    blocked: str | None = None  # why the last batch is held (an exporter refused it), else None


@dataclass(slots=True)
class Collection:
    """Owns what goes with a batch's commit: its positions, the dedupe ids of its entries, the session
    state they changed (``sessions``) and today's counts (``counts``); and the paths its hook records
    named, handed to ``followed``. The pipeline state changes under ``state_lock`` (the live view reads
    it from the loop); each step says False when the cycle must stop (a batch is held, or ``stop``)."""

    config: Config  # its collector.batch_size
    pipeline: Pipeline
    delivery: Delivery
    sessions: SessionState
    counts: EventCounts
    followed: FollowedPaths
    idle: IdleRule
    state_lock: threading.RLock
    stop: threading.Event

    def retry_held(self, result: CycleResult) -> bool:
        """The batch an exporter refused, offered again; True when nothing is held any more."""
        if self.delivery.retry():
            return True
        result.blocked = self._blocked_reason()
        return False

    def retry_quarantined(self, result: CycleResult) -> bool:
        """Records a ``quarantine retry`` asked for go through the pipeline again, first; entries an
        exporter failed on go to that exporter again."""
        due = self.pipeline.retry_quarantined()
        if due.records and not self._flush(due.records, {}, result):
            return False
        return not due.entries or self._redeliver(due.entries, result)

    async def drain(self, source: Source, result: CycleResult, progress: Progress | None) -> bool:
        """One source, batch by batch. False: stop the cycle (a batch is held, or the daemon stops);
        what was read after the last committed batch is read again later from the committed position."""
        batch_size = self.config.collector.batch_size
        records: list[RawRecord] = []
        positions: dict[str, Position] = {}
        async for record, position in source.read():
            positions[position.stream] = position
            if record is not None:
                records.append(record)
            if len(records) >= batch_size:
                if self.stop.is_set() or not self._flush(records, positions, result):
                    return False
                records, positions = [], {}
                if progress:
                    progress(source.name, result.records)
        if records or positions:
            if self.stop.is_set() or not self._flush(records, positions, result):
                return False
            if progress:
                progress(source.name, result.records)
        return True

    def close_idle_sessions(self, result: CycleResult) -> None:
        """The idle rule (``collector.daemon.idle_rule``): a lot of saved sessions at a time, each committed
        before the next is loaded."""
        tracker = self.sessions.status
        if tracker is None:
            return
        lots = self.idle.lots(tracker)
        while True:
            with self.state_lock:
                expired = next(lots, None)
                if expired is None:
                    return
                entries = self.pipeline.finish(expired)
                entries += self.pipeline.finish(self.pipeline.correlator.close_interrupted(time.time_ns()))
                self.counts.add(entries, result.by_agent)
            if entries:
                result.entries += len(entries)
                commit = Commit(seen_ids=[e["event.id"] for e in entries], sessions=self.sessions.rows())
                if not self._deliver(entries, commit, result):
                    return

    def deliver_made(self, entries: list[dict[str, Any]], result: CycleResult) -> list[dict[str, Any]]:
        """Entries the daemon makes itself (``budget.threshold``): finished, counted, delivered and committed
        like the idle rule's. Returns the fresh ones (an id the dedupe set holds is dropped)."""
        with self.state_lock:
            fresh = self.pipeline.finish(entries)
            self.counts.add(fresh, result.by_agent)
        if fresh:
            result.entries += len(fresh)
            self._deliver(fresh, Commit(seen_ids=[e["event.id"] for e in fresh]), result)
        return fresh

    def _flush(self, records: list[RawRecord], positions: dict[str, Position], result: CycleResult) -> bool:
        with self.state_lock:
            output = self.pipeline.process(records)
            self.followed.follow(output.discovered_paths)
            commit = Commit(
                positions={p.stream: p.value for p in positions.values()},
                seen_ids=[e["event.id"] for e in output.entries],
                sessions=self.sessions.rows(),
            )
            self.counts.add(output.entries, result.by_agent)
            commit.kv[COUNTS_KEY] = self.counts.saved()
        result.records += len(records)
        result.entries += len(output.entries)
        result.batches += 1
        return self._deliver(output.entries, commit, result, output.origins, output.lines)

    def _deliver(self, entries: list[dict[str, Any]], commit: Commit, result: CycleResult,
                 origins: Sequence[tuple[int, RawRecord]] = (), lines: Sequence[bytes] | None = None) -> bool:
        """Every exporter must accept the batch before its positions move (``collector.daemon.delivery``)."""
        if self.delivery.deliver(entries, commit, origins, lines):
            return True
        result.blocked = self._blocked_reason()
        return False

    def _redeliver(self, due: list[DueEntry], result: CycleResult) -> bool:
        waiting: dict[str, list[dict[str, Any]]] = {}
        for item in due:
            if self.delivery.exporter(item.exporter) is None:
                log.warning("quarantined entry %s: exporter %s is not configured; it stays quarantined",
                            item.entry.get("event.id"), item.exporter)
                self.pipeline.quarantine.keep(item.line)
                continue
            waiting.setdefault(item.exporter, []).append(item.entry)
        entries = [item.entry for item in due]
        pairs = [(exporter, waiting[exporter.name]) for exporter in self.delivery.exporters
                 if exporter.name in waiting]
        if self.delivery.deliver_to(pairs, entries, Commit(), [(i, item.origin) for i, item in enumerate(due)]):
            return True
        result.blocked = self._blocked_reason()
        return False

    def _blocked_reason(self) -> str | None:
        held = self.delivery.held
        return None if held is None else f"{held.refused_by}: {held.error}"
