"""The usage store: real fixture sessions in, the model server's numbers out; exactly once; no content."""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, collect, entry_tokens, prepare_fixture, read_output, usage_tuple
from support.usage import REAL_CASES, collected, store_db

from collector.config import load_config
from collector.paths import Paths
from collector.usage.store import UsageStore


def _store_tuples(db: sqlite3.Connection) -> Counter[tuple[int, int, int, int]]:
    rows = db.execute("SELECT input, output, cache_read, cache_write FROM events WHERE name='llm.response'")
    return Counter(tuple(r) for r in rows)


@pytest.mark.parametrize("case", REAL_CASES, ids=[f"{c.parent.name}/{c.name}" for c in REAL_CASES])
def test_store_holds_every_call_the_output_holds(case: Path, tmp_path: Path) -> None:
    paths = collected(case, tmp_path)
    entries = read_output(paths.output_dir)
    db = store_db(paths)
    assert db.execute("SELECT COUNT(*) FROM events").fetchone()[0] == len(entries)
    assert _store_tuples(db) == entry_tokens(entries)
    served = Counter(usage_tuple(d["api"], d["usage"]) for d in _served(case))
    assert not _store_tuples(db) - served, "every stored call is one the model server answered"


def _served(case: Path) -> list[dict]:
    import json

    return [json.loads(x) for x in (case / "response_usage.jsonl").read_text().splitlines() if x.strip()]


def test_replay_and_lost_checkpoint_store_nothing_twice(tmp_path: Path) -> None:
    """A crash after the store committed but before the checkpoint did: the batch comes again (here: the
    checkpoint database is gone) and the store keeps one row per entry."""
    paths = collected(FIXTURES / "claude-code" / "two_turns_resume", tmp_path)
    db = store_db(paths)
    first = db.execute("SELECT event_id, input, output FROM events ORDER BY event_id").fetchall()
    db.close()
    (paths.state_dir / "checkpoints.sqlite").unlink()
    for extra in ("checkpoints.sqlite-wal", "checkpoints.sqlite-shm"):
        (paths.state_dir / extra).unlink(missing_ok=True)
    collect(paths)
    collect(paths)
    db = store_db(paths)
    assert db.execute("SELECT event_id, input, output FROM events ORDER BY event_id").fetchall() == first
    assert len(first) > 10


def test_same_batch_twice_adds_once(tmp_path: Path) -> None:
    entry = {"event.id": "e1", "event.name": "llm.response", "time_unix_nano": time.time_ns(),
             "gen_ai.agent.type": "claude-code", "gen_ai.session.id": "s", "gen_ai.usage.input_tokens": 10}
    store = UsageStore(tmp_path / "u.sqlite")
    assert store.add([entry]) == 1
    assert store.add([entry]) == 0
    assert store.duplicates == 1
    store.close()


def test_no_prompt_or_tool_text_in_the_store(tmp_path: Path) -> None:
    paths = collected(FIXTURES / "claude-code" / "tool_then_answer", tmp_path)
    data = (paths.data_dir / "usage.sqlite").read_bytes()
    for text in (b"echo hi", b"tell me what it printed"):
        assert text not in data
    assert oct((paths.data_dir / "usage.sqlite").stat().st_mode & 0o777) == "0o600"


def test_error_message_kept_only_with_capture(tmp_path: Path) -> None:
    entry = {"event.id": "x", "event.name": "error", "time_unix_nano": time.time_ns(), "gen_ai.agent.type": "a",
             "error.type": "api_error", "error.message.length": 12, "error.message.sha256": "0" * 64}
    store = UsageStore(tmp_path / "u.sqlite")
    store.add([entry, {**entry, "event.id": "y", "error.message": "rate limited"}])
    store.close()
    rows = dict(sqlite3.connect(tmp_path / "u.sqlite").execute("SELECT event_id, detail FROM events"))
    assert rows == {"x": None, "y": "rate limited"}


def test_retention_drops_old_days_only(tmp_path: Path) -> None:
    now = time.time()
    old = {"event.id": "old", "event.name": "llm.response", "time_unix_nano": int((now - 40 * 86400) * 1e9),
           "gen_ai.agent.type": "codex", "gen_ai.session.id": "s1"}
    new = {**old, "event.id": "new", "time_unix_nano": int(now * 1e9), "gen_ai.session.id": "s2"}
    keep_all = UsageStore(tmp_path / "u.sqlite", retention_days=0)
    keep_all.add([old, new])
    keep_all.close()
    store = UsageStore(tmp_path / "u.sqlite", retention_days=30)
    assert store.prune(now) == 1
    assert store.prune(now) == 0, "once a day"
    store.close()
    db = sqlite3.connect(tmp_path / "u.sqlite")
    assert [r[0] for r in db.execute("SELECT event_id FROM events")] == ["new"]
    assert [r[0] for r in db.execute("SELECT session FROM sessions")] == ["s2"]


def test_store_can_be_turned_off(tmp_path: Path) -> None:
    paths = prepare_fixture(FIXTURES / "codex" / "tool_then_answer", tmp_path)
    config = load_config(paths.config_file, env={"AGENT_COLLECTOR_STORE__ENABLED": "false"})
    assert collect(paths, config=config)
    assert not (paths.data_dir / "usage.sqlite").exists()


_V1_EVENTS = """CREATE TABLE events (event_id TEXT PRIMARY KEY, name TEXT NOT NULL, time_ns INTEGER NOT NULL,
  day TEXT NOT NULL, agent TEXT NOT NULL, session TEXT, turn TEXT, scope TEXT, provider TEXT, model TEXT,
  input INTEGER NOT NULL DEFAULT 0, output INTEGER NOT NULL DEFAULT 0, cache_read INTEGER NOT NULL DEFAULT 0,
  cache_write INTEGER NOT NULL DEFAULT 0, reasoning INTEGER NOT NULL DEFAULT 0, agent_cost_usd REAL,
  duration_ms REAL, tool TEXT, tool_status TEXT, error_type TEXT, http_status INTEGER, detail TEXT) WITHOUT ROWID;
CREATE INDEX events_day ON events(day, agent, model);
CREATE INDEX events_time ON events(name, time_ns);
CREATE INDEX events_session ON events(session);
CREATE INDEX events_model ON events(model);"""


def _as_older_store(path: Path, select: str, columns: str, script: str) -> list[tuple[Any, ...]]:
    """The store's events (``SELECT select``) written back after ``script`` made its tables an older
    schema's; returns those rows."""
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute(f"SELECT {select}").fetchall()
        db.executescript(script)
        db.executemany(f"INSERT INTO events({columns}) VALUES({','.join('?' * len(rows[0]))})", rows)
        db.commit()
    return rows


def _adds_nothing_again(paths: Paths, path: Path, rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Every entry of the output is in the older store: opened (and moved over), it adds none of them.
    Returns those entries."""
    entries = read_output(paths.output_dir)
    assert len(rows) == len(entries) > 5
    store = UsageStore(path)
    assert store.add(entries) == 0, "the ids of the old table still dedupe"
    store.close()
    return entries


def test_a_schema_1_store_moves_into_the_rowid_table(tmp_path: Path) -> None:
    """A store written before events became a rowid table: every row is kept, the rollup and reports read
    what they read before, and an entry already in it is still not added twice."""
    from collector.usage.store import _COLUMNS, SCHEMA_VERSION, event_row

    paths = collected(FIXTURES / "claude-code" / "tool_then_answer", tmp_path)
    path = paths.data_dir / "usage.sqlite"
    names = ",".join(_COLUMNS)
    with closing(sqlite3.connect(path)) as db:
        slots = db.execute("SELECT * FROM slots ORDER BY 1, 2, 3, 4, 5, 6").fetchall()
    rows = _as_older_store(path, f"{names} FROM events ORDER BY event_id", names, f"DROP TABLE events; "
                           f"{_V1_EVENTS}; UPDATE meta SET value = '1' WHERE key = 'schema_version';")
    entries = _adds_nothing_again(paths, path, rows)
    db = sqlite3.connect(path)
    assert db.execute(f"SELECT {names} FROM events ORDER BY event_id").fetchall() == rows
    assert db.execute("SELECT * FROM slots ORDER BY 1, 2, 3, 4, 5, 6").fetchall() == slots
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events'")}
    assert "events_time" in indexes and not indexes & {"events_day", "events_session", "events_model"}
    as_stored = [tuple(None if v == "" else v for v in event_row(e)[1:len(_COLUMNS) + 1])  # '' is bound as NULL
                 for e in entries]
    assert sorted(as_stored) == rows


def test_sessions_folded_per_batch_equal_one_upsert_per_entry(tmp_path: Path) -> None:
    """One upsert per session of a batch gives the rows one upsert per entry gave (project and model
    first seen, first/last times, the latest status, a later one winning a tie)."""
    from collector.usage.store import _SESSION_UPSERT, fold_sessions, session_row

    base = {"event.name": "llm.response", "gen_ai.agent.type": "codex"}
    entries = [
        {**base, "event.id": "1", "time_unix_nano": 50, "gen_ai.session.id": "a"},
        {**base, "event.id": "2", "time_unix_nano": 40, "gen_ai.session.id": "a", "workspace.path": "/p",
         "event.name": "session.status", "session.status": "working"},
        {**base, "event.id": "3", "time_unix_nano": 40, "gen_ai.session.id": "a", "agent.model": "m1",
         "event.name": "session.status", "session.status": "waiting"},
        {**base, "event.id": "4", "time_unix_nano": 30, "gen_ai.session.id": "a", "workspace.path": "/q",
         "agent.model": "m2", "event.name": "session.status", "session.status": "idle"},
        {**base, "event.id": "5", "time_unix_nano": 90, "gen_ai.session.id": "b"},
        {**base, "event.id": "6", "time_unix_nano": 10, "gen_ai.session.id": "b", "event.name": "session.status",
         "session.status": "closed"},
        {**base, "event.id": "7", "time_unix_nano": 5, "gen_ai.session.id": None},
    ]
    stored = ("codex", "a", None, None, 45, 45, "ready", 35)
    results = []
    for folded in (False, True):
        db = sqlite3.connect(":memory:")
        db.execute("CREATE TABLE sessions (agent TEXT, session TEXT, project TEXT, model TEXT, first_ns INTEGER,"
                   " last_ns INTEGER, status TEXT, status_ns INTEGER, PRIMARY KEY (agent, session))")
        db.execute("INSERT INTO sessions VALUES(?,?,?,?,?,?,?,?)", stored)
        rows = [session_row(e) for e in entries]
        db.executemany(_SESSION_UPSERT, fold_sessions(rows) if folded else [r for r in rows if r is not None])
        results.append(db.execute("SELECT * FROM sessions ORDER BY session").fetchall())
    assert results[0] == results[1]
    assert results[1] == [("codex", "a", "/p", "m1", 30, 50, "waiting", 40),
                          ("codex", "b", None, None, 10, 90, "closed", 10)]


def test_the_rollup_reads_only_the_batch_rows(tmp_path: Path) -> None:
    """Adding a batch to the rollup reads the rows above the batch's first id (a rowid range), never a
    walk of every counted entry of the store through an index (each batch would cost more than the last)."""
    from collector.usage import rollup

    store = UsageStore(tmp_path / "u.sqlite")
    plan = " ".join(str(r[3]) for r in store._db.execute(
        "EXPLAIN QUERY PLAN " + rollup._UPSERT.format(since=" AND e.id > ?"), (0,)))
    store.close()
    assert "INTEGER PRIMARY KEY (rowid>?)" in plan and "INDEX" not in plan.replace("PRIMARY KEY", "")


_V2_EVENTS = (_V1_EVENTS.split(";")[0].replace(" WITHOUT ROWID", "")
              .replace("(event_id TEXT PRIMARY KEY,", "(id INTEGER PRIMARY KEY, event_id TEXT NOT NULL UNIQUE,"))


def test_a_schema_2_store_moves_to_the_integer_key(tmp_path: Path) -> None:
    """A store whose ``events`` was unique by the id's text: every row keeps its row id (the rollup's
    ranges), the reports read what they read before, and an entry already in it is still not added twice."""
    from support.usage import report

    from collector.usage.store import _COLUMNS, SCHEMA_VERSION, event_key

    paths = collected(FIXTURES / "codex" / "tool_then_answer", tmp_path)
    path = paths.data_dir / "usage.sqlite"

    def reports() -> list[dict]:
        kinds = ("daily", "session")
        return [{k: v for k, v in report(paths, kind).items() if k != "generated_unix"} for kind in kinds]

    before = reports()
    names = ",".join(_COLUMNS)
    rows = _as_older_store(path, f"id,{names} FROM events ORDER BY id", f"id,{names}",
                           f"DROP TABLE events; DROP TABLE collided; {_V2_EVENTS}; CREATE INDEX events_time ON "
                           "events(name, time_ns); UPDATE meta SET value = '2' WHERE key = 'schema_version';")
    _adds_nothing_again(paths, path, rows)
    db = sqlite3.connect(path)
    assert db.execute(f"SELECT id,{names} FROM events ORDER BY id").fetchall() == rows
    assert [k for (k,) in db.execute("SELECT k FROM events ORDER BY id")] == [event_key(r[1]) for r in rows]
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert db.execute("SELECT count(*) FROM collided").fetchone() == (0,)
    db.close()
    assert reports() == before and before[0]["rows"]


def _call(event_id: str, tokens: int, time_ns: int) -> dict:
    return {"event.id": event_id, "event.name": "llm.response", "time_unix_nano": time_ns,
            "gen_ai.agent.type": "codex", "gen_ai.session.id": "s", "gen_ai.usage.input_tokens": tokens}


def test_two_ids_with_one_key_are_both_stored_and_each_still_once(tmp_path: Path) -> None:
    """Ids that share their first 16 hex digits share the integer key: the second is kept (under no key,
    its id in ``collided``), and neither is counted twice when delivered again, in one batch or later,
    after a restart, or after retention dropped the first."""
    from collector.usage.store import event_key

    a, b, c = "0123456789abcdef" + "0" * 16, "0123456789abcdef" + "1" * 16, "0123456789abcdef" + "2" * 16
    assert event_key(a) == event_key(b) == event_key(c)
    now = time.time()
    old_ns, new_ns = int((now - 40 * 86400) * 1e9), int(now * 1e9)
    store = UsageStore(tmp_path / "u.sqlite")
    assert store.add([_call(a, 1, old_ns), _call(b, 10, new_ns), _call(b, 10, new_ns)]) == 2
    assert store.add([_call(a, 1, old_ns), _call(b, 10, new_ns), _call(c, 100, new_ns)]) == 1
    store.close()
    store = UsageStore(tmp_path / "u.sqlite", retention_days=30)
    assert store.prune(now) == 1
    assert store.add([_call(b, 10, new_ns), _call(c, 100, new_ns)]) == 0
    store.close()
    db = sqlite3.connect(tmp_path / "u.sqlite")
    assert sorted(db.execute("SELECT event_id, input FROM events")) == [(b, 10), (c, 100)]
    assert sorted(r[0] for r in db.execute("SELECT event_id FROM collided")) == [b, c]
    assert db.execute("SELECT SUM(input), SUM(calls) FROM slots WHERE slot >= ?", (new_ns // 900 // 10**9,)
                      ).fetchone() == (110, 2)


def test_the_key_of_any_id(tmp_path: Path) -> None:
    """Hex ids give their first 16 digits as a signed 64-bit integer; any other text a hash of it."""
    from collector.usage.store import event_key

    assert event_key("f" * 32) == 2**63 - 1 and event_key("0" * 32) == -(2**63)
    keys = [event_key(i) for i in ("e1", "new", "", "-1", " 12_3", "é" * 40, "\udc80")]
    assert all(-(2**63) <= k < 2**63 for k in keys) and len(set(keys)) == len(keys)
    store = UsageStore(tmp_path / "u.sqlite")
    assert store.add([_call(i, 1, time.time_ns()) for i in ("e1", "new", "", "-1", " 12_3", "é" * 40)]) == 6
    store.close()


def test_absent_labels_and_numbers_are_stored_as_null_and_present_ones_with_their_type(tmp_path: Path) -> None:
    """Rows are bound with '' for NULL (turned back by the statement): an absent or empty label, cost,
    latency or HTTP status is NULL, a present one keeps its value and type; sessions likewise."""
    from collector.usage.store import _COLUMNS

    bare = {"event.id": "a", "event.name": "tool.result", "time_unix_nano": 10**18, "gen_ai.agent.type": "qwen-code",
            "gen_ai.session.id": "s", "gen_ai.turn.id": "", "workspace.path": ""}
    full = {**bare, "event.id": "b", "gen_ai.turn.id": "t", "gen_ai.agent.scope": "sub", "gen_ai.provider.name": "p",
            "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 5.0, "gen_ai.usage.cost_usd": 2,
            "duration_ms": 1.5, "gen_ai.tool.name": "sh", "tool.result.status": "error", "error.type": "E",
            "http.response.status_code": 500, "error.message": "x", "workspace.path": "/w",
            "event.name": "session.status", "session.status": "idle"}
    store = UsageStore(tmp_path / "u.sqlite")
    store.add([bare])
    store.add([full])
    store.close()
    db = sqlite3.connect(tmp_path / "u.sqlite")
    types = ",".join(f"typeof({c})" for c in _COLUMNS)
    rows = dict((r[0], r[1:]) for r in db.execute(f"SELECT event_id, {types} FROM events"))
    assert rows["a"] == ("text", "text", "integer", "text", "text", "text", *["null"] * 4, *["integer"] * 5,
                         *["null"] * 7)
    assert rows["b"] == ("text", "text", "integer", "text", "text", *["text"] * 5, *["integer"] * 5, "real", "real",
                         *["text"] * 3, "integer", "text")
    values = db.execute("SELECT input, agent_cost_usd, http_status, model FROM events WHERE event_id = 'b'").fetchone()
    assert values == (5, 2.0, 500, "m")
    session = db.execute("SELECT project, model, status, status_ns FROM sessions").fetchone()
    assert session == ("/w", "m", "idle", 10**18)


def test_keys_wait_in_memory_then_move_in_one_pass_and_dedupe_throughout(tmp_path: Path, monkeypatch) -> None:
    """The keys of the last rows are answered from memory (read back from ``events`` after a restart) and
    move into ``event_keys`` every MERGE_AT rows: before, across and after the move, after a restart and
    after retention dropped rows, an entry delivered again is not stored again."""
    from collector.usage import store as usage_store

    monkeypatch.setattr(usage_store, "MERGE_AT", 10)
    now = time.time()
    old_ns, new_ns = int((now - 40 * 86400) * 1e9), int(now * 1e9)
    calls = [_call(f"{i:016x}" + "e" * 16, i, old_ns if i < 4 else new_ns) for i in range(1, 26)]
    path = tmp_path / "u.sqlite"

    def keys() -> int:
        db = sqlite3.connect(path)
        try:
            return db.execute("SELECT count(*) FROM event_keys").fetchone()[0]
        finally:
            db.close()

    store = UsageStore(path)
    assert store.add(calls[:6]) == 6 and keys() == 0
    assert store.add(calls[:8]) == 2 and keys() == 0, "the first six answered from memory"
    store.close()
    store = UsageStore(path)
    assert store.add(calls[:12]) == 4 and keys() == 12, "read back after the restart, then moved"
    assert store.add(calls[:15]) == 3 and keys() == 12
    store.close()
    store = UsageStore(path, retention_days=30)
    assert store.prune(now) == 3 and keys() == 9
    assert store.add(calls[3:15]) == 0, "neither the moved keys nor those in memory are lost by the prune"
    assert store.add(calls[3:]) == 10 and keys() == 22
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*), SUM(input) FROM events").fetchone() == (22, sum(range(4, 26)))
    assert db.execute("SELECT value FROM meta WHERE key = 'keys_upto'").fetchone() == (
        str(db.execute("SELECT MAX(id) FROM events").fetchone()[0]),)


_V3_EVENTS = _V2_EVENTS.replace("event_id TEXT NOT NULL UNIQUE,", "k INTEGER UNIQUE, event_id TEXT NOT NULL,")


def test_a_schema_3_store_moves_its_keys_out_of_the_unique_index(tmp_path: Path) -> None:
    """A store unique by its key (a unique index on ``events.k``, collided ids stored without one): rows
    and row ids kept, the keys in ``event_keys``, the collided id still told apart, nothing added twice."""
    from collector.usage.store import _COLUMNS, event_key

    a, b = "0123456789abcdef" + "0" * 16, "0123456789abcdef" + "1" * 16
    first = [_call(a, 1, time.time_ns()), _call(b, 2, time.time_ns()), _call("c" * 32, 3, time.time_ns())]
    path = tmp_path / "u.sqlite"
    store = UsageStore(path)
    assert store.add(first) == 3
    store.close()
    db = sqlite3.connect(path)
    names = ",".join(_COLUMNS)
    rows = db.execute(f"SELECT id,k,{names} FROM events ORDER BY id").fetchall()
    db.executescript(f"DROP TABLE events; DROP TABLE event_keys; {_V3_EVENTS}; "
                     "DELETE FROM meta WHERE key = 'keys_upto';")
    db.executemany(f"INSERT INTO events(id,k,{names}) VALUES({','.join('?' * (len(_COLUMNS) + 2))})", rows)
    db.commit()
    db.close()
    store = UsageStore(path)
    assert store.add([*first, _call("d" * 32, 4, time.time_ns())]) == 1
    store.close()
    db = sqlite3.connect(path)
    assert db.execute(f"SELECT id,k,{names} FROM events ORDER BY id LIMIT 3").fetchall() == rows
    assert sorted(db.execute("SELECT k FROM event_keys")) == sorted((event_key(i),) for i in (a, "c" * 32))
    assert [r[0] for r in db.execute("SELECT event_id FROM collided")] == [b]
    assert not any(r[2] for r in db.execute("PRAGMA index_list(events)")), "no unique index left"
