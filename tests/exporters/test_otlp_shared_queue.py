"""The signals of a backend share one durable log: a batch is serialised, written and fsync'd once for all
of them; each signal reads it with its own position, so one that is down keeps the segment (and its
entries) while the others go on; positions reach the disk after every batch by default, else by time or
count; a batch offered again after a restart (its source checkpoint had not committed) is not queued
twice; the per-signal directories of an older version are delivered first and then removed."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from support.otlp import FakeBackend, entries
from support.waits import wait_for

from collector.exporters import queue_log
from collector.exporters.queue import QueuedExporter, QueueOptions, new_log

FAST = QueueOptions(max_batch=50, backoff_initial=0.01, backoff_max=0.05, tick_interval=0.05, drain_timeout=1.0)
SIGNALS = ["logs", "traces", "metrics"]


class Named(FakeBackend):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


def consumers(directory: Path, options: QueueOptions = FAST, legacy: dict[str, Path] | None = None,
              start: bool = True) -> tuple[list[QueuedExporter], list[Named]]:
    log = new_log(directory, 1 << 30, SIGNALS, options)
    backends = [Named(f"otlp-x-{s}") for s in SIGNALS]
    queues = [QueuedExporter(b, directory, options=options, log=log, consumer=s, legacy=(legacy or {}).get(s),
                             start=start) for b, s in zip(backends, SIGNALS, strict=True)]
    return queues, backends


def lines_on_disk(directory: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in directory.glob("seg-*.jsonl"))


def test_one_write_and_one_fsync_per_batch_for_all_signals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fsyncs: list[int] = []
    real = queue_log.os.fsync
    monkeypatch.setattr(queue_log.os, "fsync", lambda fd: (fsyncs.append(fd), real(fd))[1])
    queues, backends = consumers(tmp_path / "q")
    for start in range(0, 300, 100):
        batch = entries(100, start)
        for q in queues:  # what the delivery chain does: the same batch to every exporter
            q.export(batch)
    segment_fd = queues[0]._log._fd
    assert fsyncs.count(segment_fd) == 3 and lines_on_disk(tmp_path / "q") == 300
    for q in queues:
        assert q.flush(10) and q.stats()["enqueued"] == 300
    for b in backends:
        assert [e["seq"] for e in b.received] == list(range(300))
    for q in queues:
        q.shutdown()


def test_a_signal_that_is_down_keeps_its_entries_and_does_not_stall_the_others(tmp_path: Path) -> None:
    options = QueueOptions(max_batch=50, backoff_initial=0.01, backoff_max=0.05, tick_interval=0.05,
                           drain_timeout=0.2, segment_bytes=4096)
    queues, backends = consumers(tmp_path / "q", options)
    backends[1].down = True
    for start in range(0, 400, 50):
        batch = entries(50, start, pad=40)
        for q in queues:
            q.export(batch)
    assert queues[0].flush(10) and queues[2].flush(10)
    assert queues[1].stats()["queued"] == 400 and lines_on_disk(tmp_path / "q") == 400  # all kept for it
    backends[1].down = False
    assert queues[1].flush(10)
    assert [e["seq"] for e in backends[1].received] == list(range(400))
    # read segments are removed
    wait_for(lambda: len(list((tmp_path / "q").glob("seg-*.jsonl"))) == 1, 10, interval=0.01)
    for q in queues:
        q.shutdown()


def test_positions_are_written_by_time_or_count_and_a_restart_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    saves: list[str] = []
    real = queue_log.Cursor.save
    monkeypatch.setattr(queue_log.Cursor, "save", lambda self: (saves.append(self.name), real(self))[1])
    options = QueueOptions(max_batch=10, backoff_initial=0.01, backoff_max=0.05, tick_interval=0.05,
                           drain_timeout=1.0, ack_interval=3600, ack_every=8)
    queues, backends = consumers(tmp_path / "q", options)
    batch = entries(200)
    for q in queues:
        q.export(batch)
    for q in queues:
        assert q.flush(10)
    assert all(len(b.received) == 200 for b in backends)
    # 20 batches of 10 per signal: written at the first (nothing saved yet), then after every 8th
    assert saves.count("logs") == 3
    ack = orjson.loads((tmp_path / "q" / "ack-logs.json").read_bytes())
    assert ack["offset"] < sum(p.stat().st_size for p in (tmp_path / "q").glob("seg-*.jsonl"))
    # a kill -9 now (no shutdown): a restart resends at most the batches after the last written position
    again, backends2 = consumers(tmp_path / "q", options)
    for q in again:
        assert q.flush(10)
    resent = [e["seq"] for e in backends2[0].received]
    assert resent == list(range(200 - len(resent), 200)) and 0 < len(resent) <= 8 * 10
    for q in again + queues:
        q.shutdown()
    assert orjson.loads((tmp_path / "q" / "ack-logs.json").read_bytes())["delivered"] >= 200


def test_a_batch_offered_again_after_a_kill_is_not_queued_twice(tmp_path: Path) -> None:
    queues, _ = consumers(tmp_path / "q", start=False)  # the backends never see it before the "kill"
    first = entries(30)
    for q in queues:
        q.export(first)
    assert lines_on_disk(tmp_path / "q") == 30
    # kill -9 before the source's checkpoint committed: the next run reads the last 10 again, with 20 new
    again, backends = consumers(tmp_path / "q")
    offered = [dict(e) for e in first[20:]] + [{"event.id": f"new-{i}", "seq": 100 + i} for i in range(20)]
    for q in again:
        q.export(offered)
    for q in again:
        assert q.flush(10)
    assert lines_on_disk(tmp_path / "q") == 50
    for backend in backends:
        ids = [e["event.id"] for e in backend.received]
        assert len(ids) == len(set(ids)) == 50
    assert again[0].stats()["requeued_skipped"] == 10
    for q in again + queues:
        q.shutdown()


def test_the_default_writes_the_position_after_every_batch(tmp_path: Path) -> None:
    queues, backends = consumers(tmp_path / "q", QueueOptions(max_batch=10, tick_interval=0.05, drain_timeout=1.0,
                                                              ack_interval=3600))
    for q in queues:
        q.export(entries(100))
    for q in queues:
        assert q.flush(10)
    size = sum(p.stat().st_size for p in (tmp_path / "q").glob("seg-*.jsonl"))
    for signal in SIGNALS:  # no shutdown (a kill -9 now): every position is already on disk
        assert orjson.loads((tmp_path / "q" / f"ack-{signal}.json").read_bytes())["offset"] == size
    again, backends2 = consumers(tmp_path / "q")
    for q in again:
        assert q.flush(10)
    assert all(b.received == [] for b in backends2)
    for q in again + queues:
        q.shutdown()


def test_an_older_versions_per_signal_queue_is_delivered_first_then_removed(tmp_path: Path) -> None:
    legacy: dict[str, Path] = {}
    for signal in SIGNALS:
        down = FakeBackend()
        down.down = True
        old = QueuedExporter(down, tmp_path / f"otlp-x-{signal}", options=QueueOptions(drain_timeout=0.1))
        old.export(entries(30))
        old.shutdown()
        legacy[signal] = tmp_path / f"otlp-x-{signal}"
    queues, backends = consumers(tmp_path / "q", legacy=legacy, start=False)
    assert all(q.stats()["queued"] == 30 for q in queues)
    batch = entries(20, 30)
    for q in queues:
        q.export(batch)
        q.start()
    for q in queues:
        assert q.flush(10)
    for b in backends:
        assert [e["seq"] for e in b.received] == list(range(50))
    wait_for(lambda: not any(p.exists() for p in legacy.values()), 10, interval=0.01)
    for q in queues:
        q.shutdown()


