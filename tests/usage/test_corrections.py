"""A correction replaces its stored row in place, and the rollups the reports read follow (real SQLite)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from collector.usage import rollup
from collector.usage.store import MERGE_AT, UsageStore

NOW = time.time_ns()


def _call(eid: str, output: int, **extra: Any) -> dict[str, Any]:
    return {"event.id": eid, "event.name": "llm.response", "time_unix_nano": NOW, "gen_ai.agent.type": "claude-code",
            "gen_ai.session.id": "s", "gen_ai.response.model": "claude-sonnet-4-5",
            "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": output, **extra}


def _sums(store: UsageStore) -> tuple[Any, ...]:
    db = store._db
    return (db.execute("SELECT COUNT(*), SUM(output), SUM(agent_cost_usd) FROM events").fetchone(),
            db.execute("SELECT SUM(calls), SUM(output), SUM(agent_cost) FROM slots").fetchone(),
            db.execute("SELECT SUM(calls), SUM(output), SUM(agent_cost) FROM session_usage").fetchone())


def test_a_correction_updates_the_row_and_the_rollups(tmp_path: Path) -> None:
    store = UsageStore(tmp_path / "u.sqlite")
    store.add([_call("a", 1), _call("b", 5)])
    fixed = _call("a", 17, **{"collector.correction": "d1", "gen_ai.usage.cost_usd": 0.25})
    assert store.add([fixed]) == 0 and store.corrected == 1 and store.duplicates == 0
    assert _sums(store) == ((2, 22, 0.25), (2, 22, 0.25), (2, 22, 0.25))
    db = store._db
    counted = db.execute("SELECT SUM(calls), SUM(output) FROM slots").fetchone()
    rollup.rebuild(db)  # what a rebuild from the rows makes: the same as the corrected rollup
    assert db.execute("SELECT SUM(calls), SUM(output) FROM slots").fetchone() == counted


def test_a_correction_of_a_row_whose_key_is_merged_is_found(tmp_path: Path) -> None:
    store = UsageStore(tmp_path / "u.sqlite")
    store.add([_call(f"c{n}", 1) for n in range(MERGE_AT + 1)])  # past MERGE_AT: keys in event_keys
    assert store._pending == {}
    store.add([_call("c7", 9, **{"collector.correction": "d"})])
    assert store._db.execute("SELECT output FROM events WHERE event_id = 'c7'").fetchone() == (9,)
    assert store._db.execute("SELECT SUM(output) FROM slots").fetchone() == (MERGE_AT + 1 + 8,)


def test_a_correction_of_a_row_not_stored_is_inserted(tmp_path: Path) -> None:
    store = UsageStore(tmp_path / "u.sqlite")
    assert store.add([_call("new", 3, **{"collector.correction": "d"})]) == 1
    assert _sums(store)[0] == (1, 3, None)


def test_an_entry_and_its_correction_in_one_batch_store_the_correction(tmp_path: Path) -> None:
    # what a rebuild from the JSONL output meets: the line and, later in the file, its correction
    store = UsageStore(tmp_path / "u.sqlite")
    fixed = _call("a", 17, **{"collector.correction": "d1"})
    assert store.add([_call("a", 1), _call("b", 5), fixed, _call("a", 1)]) == 2
    assert _sums(store) == ((2, 22, None), (2, 22, None), (2, 22, None))
    later = _call("a", 18, **{"collector.correction": "d2"})  # a second correction of it: stored before
    store.add([later])
    assert _sums(store)[1] == (2, 23, None)
