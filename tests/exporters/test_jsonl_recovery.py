"""The JSONL exporter's read-back after a `kill -9`, across two kills: a batch written to the output whose
checkpoint never committed (an orphan) is not written again, even when another source's batch committed
first and moved the mark past it, and a second kill came before the orphan's own batch was offered again
(found by the 25-kill crash test: 2,000 hooks written twice)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from support import read_output

from collector.exporters.jsonl import JsonlExporter


def _batch(prefix: str, n: int) -> list[dict[str, Any]]:
    return [{"event.id": f"{prefix}{i:030d}", "event.name": "tool.call"} for i in range(n)]


class Store:
    """What the checkpoint store keeps: the last committed mark and the delivered ids."""

    def __init__(self) -> None:
        self.mark: dict[str, Any] = {}
        self.delivered: set[str] = set()

    def commit(self, exporter: JsonlExporter, batch: list[dict[str, Any]]) -> None:
        self.mark = exporter.mark()
        self.delivered |= {e["event.id"] for e in batch}

    def seen(self, ids: Any) -> set[str]:
        return set(ids) & self.delivered


def test_an_orphan_batch_survives_a_second_kill_after_another_batch_committed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    store = Store()
    first, x, y = _batch("a", 5), _batch("b", 5), _batch("c", 5)
    run1 = JsonlExporter(out, store.mark, store.seen)
    run1.export(first)
    store.commit(run1, first)
    run1.export(x)  # kill -9 before x's checkpoint commit: x is in the output, its positions are not
    run2 = JsonlExporter(out, store.mark, store.seen)
    run2.export(y)  # another source's batch is read and committed first
    store.commit(run2, y)
    assert "scan" in store.mark, "the mark keeps where reading back starts while x is an orphan"
    # kill -9 again, before x is offered again
    run3 = JsonlExporter(out, store.mark, store.seen)
    run3.export(x)  # x's records are read again from their committed position
    store.commit(run3, x)
    assert "scan" not in store.mark, "x was offered again and committed: no more reading back"
    counts = Counter(e["event.id"] for e in read_output(out))
    assert set(counts) == {e["event.id"] for e in first + x + y}
    assert max(counts.values()) == 1, "x written once"
    assert run3.skipped_duplicates == 5


def test_committed_entries_read_back_are_not_orphans(tmp_path: Path) -> None:
    out = tmp_path / "out"
    store = Store()
    run1 = JsonlExporter(out, store.mark, store.seen)
    batch = _batch("a", 3)
    run1.export(batch)
    store.commit(run1, batch)
    store.mark = {}  # as if the mark was lost: everything is read back, all of it delivered already
    run2 = JsonlExporter(out, store.mark, store.seen)
    assert "scan" not in run2.mark()
    run2.export(_batch("b", 2))
    assert "scan" not in run2.mark()


def test_orphans_never_offered_again_are_let_go(tmp_path: Path, monkeypatch: Any) -> None:
    import collector.exporters.jsonl as jsonl

    monkeypatch.setattr(jsonl, "RECENT_IDS", 10)
    out = tmp_path / "out"
    store = Store()
    run1 = JsonlExporter(out, store.mark, store.seen)
    run1.export(_batch("x", 3))  # never committed, never offered again
    run2 = JsonlExporter(out, store.mark, store.seen)
    later = _batch("y", 5)
    run2.export(later)
    store.commit(run2, later)
    assert "scan" in store.mark
    more = _batch("z", 11)
    run2.export(more)
    store.commit(run2, more)
    assert "scan" not in store.mark, "bounded: the read-back does not grow for ever"


def test_the_read_back_does_not_grow_across_restarts(tmp_path: Path, monkeypatch: Any) -> None:
    """An orphan never offered again, and a daemon restarted again and again: the scan point is let go once
    it lies more than SCAN_LIMIT bytes back, so start-up never reads more than that."""
    import collector.exporters.jsonl as jsonl

    monkeypatch.setattr(jsonl, "SCAN_LIMIT", 2000)
    out = tmp_path / "out"
    store = Store()
    JsonlExporter(out, store.mark, store.seen).export(_batch("x", 2))  # an orphan, never offered again
    for run in range(20):  # each run writes and commits a little, then is killed
        exporter = JsonlExporter(out, store.mark, store.seen)
        batch = _batch(f"r{run:02d}", 3)
        exporter.export(batch)
        store.commit(exporter, batch)
        if "scan" not in store.mark:
            break
    assert "scan" not in store.mark, "let go"
    assert 2000 < store.mark["size"] < 2000 + 1000


def test_the_recent_ids_are_the_last_written_first_in_first_out(tmp_path: Path, monkeypatch: Any) -> None:
    from collector.exporters import jsonl

    monkeypatch.setattr(jsonl, "RECENT_IDS", 3)
    store = Store()
    exporter = JsonlExporter(tmp_path / "out", store.mark, store.seen)
    a, b, c, d = _batch("a", 1), _batch("b", 1), _batch("c", 1), _batch("d", 1)
    for batch in (a, b, a, c):  # a offered again: skipped, and it keeps its place (the oldest)
        exporter.export(batch)
    assert exporter.skipped_duplicates == 1
    exporter.export(d)  # four ids: the oldest (a) is forgotten, b, c and d are still known
    exporter.export(b + c + d)
    assert exporter.skipped_duplicates == 4
    exporter.export(a)
    assert Counter(e["event.id"] for e in read_output(tmp_path / "out"))[a[0]["event.id"]] == 2
