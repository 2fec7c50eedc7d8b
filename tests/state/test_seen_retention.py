"""The dedupe-id table expires: ids older than ``collector.seen_retention_days`` are pruned when the
Service starts, and every id inside the window still stops a re-read record (no duplicate let through)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
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


def test_recent_ids_move_into_the_seen_table_and_keep_their_expiry(tmp_path: Path, monkeypatch) -> None:
    """Ids are first kept in ``seen_new`` (append-only, answered from memory) and move into ``seen`` in one
    sorted pass every MERGE_AT ids: across the move, a reopen and a prune every id answers as before, and
    an id committed again keeps the time it was first delivered."""
    from collector.state import checkpoints

    monkeypatch.setattr(checkpoints, "MERGE_AT", 10)
    now = [1_000 * DAY]
    path = tmp_path / "c.sqlite"
    store = CheckpointStore(path, clock=lambda: now[0])
    store.commit(Commit(seen_ids=[f"old-{i}" for i in range(6)]))
    now[0] += 10 * DAY
    store.commit(Commit(seen_ids=[f"new-{i}" for i in range(6)] + ["old-0"]))  # 12 ids: moved into seen
    store.commit(Commit(seen_ids=["late-0", "late-1", "old-1"]))  # stays in seen_new, in memory
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM seen").fetchone()[0] == 12
    assert db.execute("SELECT count(*) FROM seen_new").fetchone()[0] == 3
    db.close()
    store.close()

    store = CheckpointStore(path, clock=lambda: now[0])
    try:
        everyone = [f"old-{i}" for i in range(6)] + [f"new-{i}" for i in range(6)] + ["late-0", "late-1"]
        assert store.seen([*everyone, "never"]) == set(everyone)
        now[0] += 25 * DAY  # old-*: 35 days since first delivered, new-* and late-*: 25
        assert store.prune_seen(30 * DAY) == 6  # old-1's second commit does not extend its time
        assert store.seen(everyone) == set(everyone[6:])
        assert store.seen_count() == 8
    finally:
        store.close()


def test_a_failed_commit_remembers_no_id(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "c.sqlite")
    try:
        with pytest.raises(TypeError):
            store.commit(Commit(seen_ids=["x"], kv={"bad": object()}))
        assert store.seen(["x"]) == set()
        store.commit(Commit(seen_ids=["x"]))
        assert store.seen(["x"]) == {"x"}
    finally:
        store.close()


def test_saved_sessions_come_back_and_unknown_ones_are_none(tmp_path: Path) -> None:
    """``session`` answers a session never saved without a query; one saved before the store was opened,
    and one saved after the first question, both come back."""
    from collector.state.checkpoints import SessionRow

    path = tmp_path / "c.sqlite"
    store = CheckpointStore(path)
    store.commit(Commit(sessions=[SessionRow("correlator", "a", {"n": 1}, last=5)]))
    store.close()
    store = CheckpointStore(path)
    try:
        assert store.session("correlator", "a") == {"n": 1}
        assert store.session("correlator", "b") is None
        assert store.session("status", "a") is None
        store.commit(Commit(sessions=[SessionRow("correlator", "b", {"n": 2}, last=6),
                                      SessionRow("correlator", "a", {"n": 3}, last=7)]))
        assert store.session("correlator", "b") == {"n": 2}
        assert store.session("correlator", "a") == {"n": 3}
    finally:
        store.close()
