"""The durable queue: order, retry with backoff, cap with drop-oldest, restart, torn lines, rejects."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import orjson
from support.otlp import FakeBackend, entries
from support.waits import wait_for

from collector.exporters.base import Entry
from collector.exporters.queue import ACK_FILE, QueuedExporter, QueueOptions

FAST = QueueOptions(
    max_batch=50, backoff_initial=0.01, backoff_max=0.05, tick_interval=0.05, drain_timeout=1.0
)


def test_delivers_everything_in_order(tmp_path: Path) -> None:
    backend = FakeBackend()
    q = QueuedExporter(backend, tmp_path / "q", options=FAST)
    for i in range(0, 1000, 100):
        q.export(entries(100, i))
    assert q.flush(10)
    assert [e["seq"] for e in backend.received] == list(range(1000))
    stats = q.stats()
    assert stats["queued"] == 0 and stats["delivered"] == 1000 and stats["dropped"] == 0
    assert stats["inner"] == {"received": 1000}
    q.shutdown()


def test_export_does_not_wait_for_a_slow_backend(tmp_path: Path) -> None:
    backend = FakeBackend()
    backend.delay = 0.5
    q = QueuedExporter(backend, tmp_path / "q", options=FAST)
    started = time.monotonic()
    for i in range(10):
        q.export(entries(10, i * 10))
    assert time.monotonic() - started < 2.5  # ten appends, not ten deliveries (5 s at 0.5 s each)
    backend.delay = 0.0
    assert q.flush(10)
    q.shutdown()


def test_backend_down_then_up_loses_nothing(tmp_path: Path) -> None:
    backend = FakeBackend()
    backend.down = True
    q = QueuedExporter(backend, tmp_path / "q", options=FAST)
    q.export(entries(300))
    wait_for(lambda: q.stats()["failures"] >= 3, 10, interval=0.01)
    stats = q.stats()
    assert (
        stats["backend_up"] is False
        and stats["queued"] == 300
        and "connection refused" in stats["last_error"]
    )
    backend.down = False
    assert q.flush(10)
    assert [e["seq"] for e in backend.received] == list(range(300))
    assert q.stats()["backend_up"] is True
    q.shutdown()


def test_restart_resumes_after_the_last_acknowledged_batch(tmp_path: Path) -> None:
    backend = FakeBackend()
    q = QueuedExporter(backend, tmp_path / "q", options=FAST)
    q.export(entries(100))
    assert q.flush(10)
    backend.down = True
    q.export(entries(100, 100))
    q.shutdown()  # cannot drain: the second hundred stays on disk
    assert q.stats()["queued"] == 100
    backend2 = FakeBackend()
    q2 = QueuedExporter(backend2, tmp_path / "q", options=FAST, start=False)
    assert q2.stats()["queued"] == 100 and q2.stats()["delivered"] == 100
    q2.start()
    assert q2.flush(10)
    assert [e["seq"] for e in backend2.received] == list(range(100, 200))
    q2.shutdown()


def test_cap_drops_oldest_and_counts(tmp_path: Path) -> None:
    backend = FakeBackend()
    backend.down = True
    opts = QueueOptions(
        max_batch=50, backoff_initial=0.01, backoff_max=0.05, segment_bytes=4096, drain_timeout=0.2
    )
    q = QueuedExporter(backend, tmp_path / "q", cap_bytes=20_000, options=opts)
    for i in range(0, 1000, 10):
        q.export(entries(10, i, pad=50))
    stats = q.stats()
    assert stats["queued_bytes"] <= 20_000
    assert stats["dropped"] > 0
    assert stats["queued"] + stats["dropped"] == 1000
    backend.down = False
    assert q.flush(10)
    seqs = [e["seq"] for e in backend.received]
    # the newest survive, in order, and nothing but the oldest went missing
    assert seqs == sorted(seqs) and seqs[-1] == 999
    assert seqs == list(range(1000 - len(seqs), 1000))
    assert len(seqs) == stats["queued"]
    q.shutdown()
    assert orjson.loads((tmp_path / "q" / ACK_FILE).read_bytes())["dropped"] == stats["dropped"]


def test_refused_batches_are_dropped_and_counted_not_retried(tmp_path: Path) -> None:
    backend = FakeBackend()
    backend.refuse = True
    q = QueuedExporter(backend, tmp_path / "q", options=FAST)
    q.export(entries(20))
    assert q.flush(10)
    assert q.stats()["rejected"] == 20 and backend.received == []
    backend.refuse = False
    q.export(entries(5, 20))
    assert q.flush(10)
    assert [e["seq"] for e in backend.received] == list(range(20, 25))
    q.shutdown()


def test_torn_last_line_and_corrupt_lines_are_skipped(tmp_path: Path) -> None:
    backend = FakeBackend()
    backend.down = True
    q = QueuedExporter(backend, tmp_path / "q", options=FAST)
    q.export(entries(3))
    q.shutdown()
    seg = sorted((tmp_path / "q").glob("seg-*.jsonl"))[-1]
    with open(seg, "ab") as fh:
        fh.write(b"not json\n" + orjson.dumps(entries(1, 3)[0]) + b"\n" + b'{"event.id": "torn')
    backend2 = FakeBackend()
    q2 = QueuedExporter(backend2, tmp_path / "q", options=FAST)
    assert q2.flush(10)
    assert [e["seq"] for e in backend2.received] == [0, 1, 2, 3]
    assert q2.stats()["corrupt"] == 1
    q2.shutdown()


def test_tick_is_called_when_idle(tmp_path: Path) -> None:
    backend = FakeBackend()
    q = QueuedExporter(backend, tmp_path / "q", options=FAST)
    wait_for(lambda: backend.ticks >= 2, 10, interval=0.01)
    q.shutdown()


class Buggy(FakeBackend):
    """Raises ``error`` on any batch holding the entry of sequence number ``bad``."""

    def __init__(self, bad: int, error: Exception) -> None:
        super().__init__()
        self.bad, self.error = bad, error

    def export(self, batch: Sequence[Entry]) -> None:
        if any(e["seq"] == self.bad for e in batch):
            raise self.error
        super().export(batch)


def test_unexpected_exceptions_do_not_kill_delivery(tmp_path: Path) -> None:
    backend = Buggy(0, KeyError("bug"))
    q = QueuedExporter(
        backend, tmp_path / "q", options=QueueOptions(max_batch=1, backoff_initial=0.01, backoff_max=0.01)
    )
    q.export(entries(3))
    assert q.flush(10)
    assert [e["seq"] for e in backend.received] == [1, 2]
    assert q.stats()["rejected"] == 1
    q.shutdown()


def test_a_batch_the_inner_exporter_keeps_failing_on_is_narrowed_to_the_bad_entry(tmp_path: Path) -> None:
    """Not the whole batch dropped for one bad entry: after max_unexpected_failures it is bisected, the
    entry that fails alone goes to the poison sink with the exception, every other one is delivered once."""
    backend = Buggy(137, TypeError("bug"))
    refused: list[tuple[Entry, str]] = []
    q = QueuedExporter(backend, tmp_path / "q", options=QueueOptions(max_batch=512, backoff_initial=0.01,
                                                                     backoff_max=0.01),
                       poison=lambda e, why: refused.append((e, why)))
    q.export(entries(300))
    assert q.flush(10)
    assert sorted(e["seq"] for e in backend.received) == [i for i in range(300) if i != 137]
    assert [(e["seq"], why) for e, why in refused] == [(137, "fake: TypeError")]
    assert q.stats()["rejected"] == 1 and q.stats()["queued"] == 0
    q.shutdown()


def test_a_non_json_entry_is_poison_at_the_door_and_the_rest_is_queued(tmp_path: Path) -> None:
    backend = FakeBackend()
    refused: list[tuple[Entry, str]] = []
    q = QueuedExporter(backend, tmp_path / "q", options=FAST, poison=lambda e, why: refused.append((e, why)))
    batch = entries(3)
    batch[1]["x"] = object()
    batch[2]["text"] = "cut emoji \ud83d"
    q.export(batch)
    assert q.flush(10)
    assert [e["seq"] for e in backend.received] == [0]
    assert [e["seq"] for e, _ in refused] == [1, 2] and all("not JSON" in why for _, why in refused)
    assert q.stats()["rejected"] == 2
    q.shutdown()
