"""The checkpoint store's tables as they are laid out now, and a store of an older layout moving into it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from collector.state import checkpoints
from collector.state.checkpoints import CheckpointStore, Commit, SessionRow

_OLD_SESSIONS = """
CREATE TABLE sessions (scope TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
    last INTEGER NOT NULL, due INTEGER, updated REAL NOT NULL, PRIMARY KEY (scope, key)) WITHOUT ROWID;
CREATE INDEX sessions_due ON sessions(scope, due) WHERE due IS NOT NULL;
CREATE INDEX sessions_updated ON sessions(updated);
"""


def _rows(path: Path) -> list[tuple]:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT scope, key, value, last, due, updated FROM sessions ORDER BY scope, key").fetchall()
    finally:
        db.close()


def test_sessions_of_the_without_rowid_layout_move_and_answer_as_before(tmp_path: Path) -> None:
    """Saved session state from the WITHOUT ROWID table: every row kept as it was, the idle rule's range,
    the refill and one session's lookup answer the same, and a write replaces a moved row."""
    path = tmp_path / "checkpoints.sqlite"
    clock = iter(range(100, 200)).__next__
    store = CheckpointStore(path, clock=lambda: float(clock()))
    store.commit(Commit(sessions=[SessionRow("status", f"a\x1f{i}", {"n": i}, last=i, due=1000 + i % 3)
                                  for i in range(10)] + [SessionRow("turns", "a\x1f1", [None, [], []])]))
    store.close()
    db = sqlite3.connect(path)
    saved = db.execute("SELECT * FROM sessions").fetchall()
    db.executescript(f"DROP TABLE sessions; {_OLD_SESSIONS}")
    db.executemany("INSERT INTO sessions VALUES(?,?,?,?,?,?)", saved)
    db.commit()
    db.close()
    before = _rows(path)
    assert len(before) == 11
    store = CheckpointStore(path)
    assert _rows(path) == before
    assert [k for k, _ in store.sessions_due("status", 1001, page=2)] == [f"a\x1f{i}" for i in (0, 3, 6, 9, 1, 4, 7)]
    assert store.session("turns", "a\x1f1") == [None, [], []]
    assert [v["n"] for _, v in store.recent_sessions("status", 3)] == [7, 8, 9]
    store.commit(Commit(sessions=[SessionRow("status", "a\x1f3", {"n": 33}, last=50, due=None)]))
    assert store.session("status", "a\x1f3") == {"n": 33}
    assert "a\x1f3" not in [k for k, _ in store.sessions_due("status", 5000)]
    store.close()
    db = sqlite3.connect(path)
    layout = db.execute("SELECT sql FROM sqlite_master WHERE name = 'sessions'").fetchone()[0]
    indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'sessions'"
                                        " AND sql IS NOT NULL")}
    db.close()
    assert "WITHOUT ROWID" not in layout.upper()
    assert indexes == {"sessions_due_key"}


def test_the_idle_rules_range_reads_the_index_in_order(tmp_path: Path) -> None:
    """The keyset cursor of ``sessions_due`` is one range of an index that holds (scope, due, key): no
    pass over the table, no sort."""
    store = CheckpointStore(tmp_path / "checkpoints.sqlite")
    plan = " ".join(str(r[3]) for r in store._db.execute(
        "EXPLAIN QUERY PLAN SELECT due, key, value FROM sessions WHERE scope=? AND due IS NOT NULL AND due<=? "
        "AND (due, key) > (?, ?) ORDER BY due, key LIMIT ?", ("status", 5, 0, "", 10)))
    store.close()
    assert "USING INDEX sessions_due_key" in plan and "TEMP B-TREE" not in plan and "SCAN" not in plan


def test_prune_sessions_forgets_rows_not_written_for_the_retention(tmp_path: Path) -> None:
    now = [1000.0]
    store = CheckpointStore(tmp_path / "checkpoints.sqlite", clock=lambda: now[0])
    store.commit(Commit(sessions=[SessionRow("status", "old", 1), SessionRow("status", "kept", 2)]))
    now[0] = 5000.0
    store.commit(Commit(sessions=[SessionRow("status", "kept", 3)]))
    assert store.prune_sessions(3000) == 1
    assert store.session("status", "old") is None and store.session("status", "kept") == 3
    store.close()


def test_a_session_never_saved_is_answered_from_the_filter_and_a_shared_bit_still_asks_sqlite(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoints, "SAVED_BITS", 8)  # every hash lands on one of 8 bits: collisions galore
    store = CheckpointStore(tmp_path / "c.sqlite")
    store.commit(Commit(sessions=[SessionRow("status", f"s{i}", {"n": i}) for i in range(3)]))
    reopened = CheckpointStore(tmp_path / "c.sqlite")  # the filter is loaded from the table when first asked
    assert [reopened.session("status", f"s{i}") for i in range(3)] == [{"n": 0}, {"n": 1}, {"n": 2}]
    asked = [k for k in (f"new{i}" for i in range(40)) if reopened.session("status", k) is not None]
    assert asked == []  # bits shared with saved sessions: SQLite answered, none is taken for saved
    reopened.commit(Commit(sessions=[SessionRow("turns", "later", [1])]))
    assert reopened.session("turns", "later") == [1]  # a commit sets its bit
    monkeypatch.setattr(checkpoints, "SAVED_BITS", 1 << 24)
    fresh = CheckpointStore(tmp_path / "c.sqlite")
    selects = []
    fresh._db.set_trace_callback(selects.append)
    assert fresh.session("status", "s1") == {"n": 1}
    selects.clear()
    assert [fresh.session("status", f"never{i}") for i in range(200)] == [None] * 200
    assert len(selects) <= 2  # never saved: answered from memory (a bit shared by chance may ask SQLite)
    for s in (store, reopened, fresh):
        s.close()
