"""The dedupe-id table expires: ids older than ``collector.seen_retention_days`` are pruned when the
Service starts, and every id inside the window still stops a re-read record (no duplicate let through)."""

from __future__ import annotations

import time
from pathlib import Path

from support import FIXTURES, collect, prepare_fixture, read_output

from collector.state.checkpoints import CheckpointStore, Commit

DAY = 86400.0


def test_old_ids_are_pruned_and_recent_ones_still_block_duplicates(tmp_path: Path) -> None:
    paths = prepare_fixture(FIXTURES / "claude-code" / "tool_then_answer", tmp_path)
    first = collect(paths)
    assert len(first) > 5
    db = paths.state_dir / "checkpoints.sqlite"
    store = CheckpointStore(db, clock=lambda: time.time() - 31 * DAY)  # default retention: 30 days
    old = [f"old-{i:06d}" for i in range(20_000)]
    store.commit(Commit(seen_ids=old))
    store.commit(Commit(forget=list(store.positions())))  # every source is read again from the start
    assert store.seen_count() == len(old) + len(first)
    store.close()

    again = collect(paths, output=tmp_path / "second-output")  # a fresh output: no help from its memory

    assert again == [], "a record read again inside the retention window must not come out twice"
    assert read_output(paths.output_dir) == first
    store = CheckpointStore(db)
    try:
        assert store.seen(old) == set(), "ids past the retention are pruned at start-up"
        assert store.seen(e["event.id"] for e in first) == {e["event.id"] for e in first}
        assert store.seen_count() == len(first)
    finally:
        store.close()


def test_prune_keeps_ids_inside_the_window(tmp_path: Path) -> None:
    now = [1_000 * DAY]
    store = CheckpointStore(tmp_path / "c.sqlite", clock=lambda: now[0])
    try:
        store.commit(Commit(seen_ids=["a", "b"]))
        now[0] += 10 * DAY
        store.commit(Commit(seen_ids=["c"]))
        now[0] += 25 * DAY  # a, b: 35 days old; c: 25 days
        assert store.prune_seen(30 * DAY) == 2
        assert store.seen(["a", "b", "c"]) == {"c"}
    finally:
        store.close()
