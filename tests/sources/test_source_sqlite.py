"""The sqlite source: read-only and WAL-aware, watermark + key positions, busy handling, restarts, and
kill -9 of a collector process in the middle of a database being written."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.sqlite import SPEC, make_db, read, rows
from support.waits import free_port

from collector.definitions import load_definitions
from collector.paths import Paths
from collector.sources.factory import BuildContext, build_sources
from collector.sources.sqlite_rows import SqliteRows
from collector.sources.sqlite_specs import RelatedSpec, TableSpec

ROOT = Path(__file__).resolve().parents[2]
def test_rows_still_in_the_wal_are_read(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    writer = make_db(db)
    writer.executemany("INSERT INTO item VALUES (?, ?, ?)", [(f"r{i}", i, "x") for i in range(50)])
    assert (tmp_path / "a.db-wal").stat().st_size > db.stat().st_size  # nothing checkpointed yet
    items = read(SqliteRows("s", "a", str(db), SPEC, {}))
    assert len(rows(items)) == 50
    record = items[0][0]
    assert record is not None and record.kind == "sqlite" and record.data["table"] == "item"
    assert set(record.data["row"]) == {"id", "updated", "body"}  # the position aliases are not leaked
    writer.close()


def test_the_writer_is_never_blocked(tmp_path: Path) -> None:
    """While the source is in the middle of a table, the agent can still commit with no busy wait."""
    db = tmp_path / "a.db"
    writer = make_db(db)
    writer.executemany("INSERT INTO item VALUES (?, ?, ?)", [(f"r{i:03}", i, "x") for i in range(10)])
    source = SqliteRows("s", "a", str(db), SPEC, {}, batch_rows=3)

    async def go() -> list[str]:
        seen = []
        async for record, _ in source.read():
            assert record is not None
            seen.append(record.data["row"]["id"])
            if len(seen) <= 5:  # the agent writes while we are between two rows of one page
                writer.execute("INSERT INTO item VALUES (?, ?, ?)", (f"w{len(seen)}", 1000 + len(seen), "y"))
        return seen

    seen = asyncio.run(go())
    assert seen == [f"r{i:03}" for i in range(10)] + [f"w{i}" for i in range(1, 6)]
    writer.close()


def test_watermark_ties_pages_and_updates(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    writer = make_db(db)
    writer.executemany("INSERT INTO item VALUES (?, ?, ?)", [(f"r{i}", 7, "x") for i in range(5)])  # one tie
    source = SqliteRows("s", "a", str(db), SPEC, {}, batch_rows=2)
    first = read(source)
    assert rows(first) == [(f"r{i}", 7) for i in range(5)]
    assert first[-1][1].value == {"wm": 7, "key": "r4", "ino": db.stat().st_ino}
    assert read(source) == []

    writer.execute("UPDATE item SET updated = 9, body = 'done' WHERE id = 'r2'")  # a message completes
    writer.execute("INSERT INTO item VALUES ('r5', 7, 'late')")  # same watermark, key after the last: read
    again = read(source)
    assert rows(again) == [("r5", 7), ("r2", 9)]
    writer.close()


def test_a_restart_continues_from_the_committed_position(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    writer = make_db(db)
    writer.executemany("INSERT INTO item VALUES (?, ?, ?)", [(f"r{i}", i, "x") for i in range(4)])
    items = read(SqliteRows("s", "a", str(db), SPEC, {}))
    committed = {items[1][1].stream: items[1][1].value}  # the crash came after the second row's batch
    writer.execute("INSERT INTO item VALUES ('r9', 99, 'x')")
    resumed = read(SqliteRows("s", "a", str(db), SPEC, committed))
    assert rows(resumed) == [("r2", 2), ("r3", 3), ("r9", 99)]
    writer.close()


def test_busy_is_counted_and_retried_next_cycle(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    writer = make_db(db, wal=False)  # a rollback-journal database: an exclusive writer locks readers out
    writer.execute("INSERT INTO item VALUES ('r1', 1, 'x')")
    writer.execute("BEGIN EXCLUSIVE")
    writer.execute("INSERT INTO item VALUES ('r2', 2, 'x')")
    source = SqliteRows("s", "a", str(db), SPEC, {}, busy_timeout_s=0.05)
    assert read(source) == []
    assert source.stats.extra["busy"] == 1 and source.stats.errors == 0
    writer.execute("COMMIT")
    assert rows(read(source)) == [("r1", 1), ("r2", 2)]
    writer.close()


def test_missing_then_replaced_database(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    source = SqliteRows("s", "a", str(db), SPEC, {})
    assert read(source) == [] and source.stats.errors == 0  # the agent has not run yet
    writer = make_db(db)
    writer.execute("INSERT INTO item VALUES ('r1', 5, 'x')")
    writer.close()
    assert rows(read(source)) == [("r1", 5)]
    os.link(db, tmp_path / "keep.db")  # the old inode stays in use, so the new file cannot get its number
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    writer = make_db(db)
    writer.execute("INSERT INTO item VALUES ('r1', 1, 'x')")  # older watermark than we had
    writer.close()
    assert rows(read(source)) == [("r1", 1)]


def test_a_broken_table_spec_is_an_error_not_a_crash(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    make_db(db).close()
    source = SqliteRows("s", "a", str(db), [TableSpec("nope", "updated", "id")] + SPEC, {})
    assert read(source) == []
    assert source.stats.errors == 1 and "nope" in str(source.stats.last_error)


def test_the_opencode_definition_builds_this_source(tmp_path: Path) -> None:
    defn = load_definitions(None).agents["opencode"]
    paths = Paths(home=tmp_path, config_dir=tmp_path / "c", data_dir=tmp_path / "d")
    env_value = os.environ.pop("XDG_DATA_HOME", None)
    try:
        sources = build_sources(defn, BuildContext(paths, {}, 1 << 20))
    finally:
        if env_value is not None:
            os.environ["XDG_DATA_HOME"] = env_value
    (db_source,) = [s for s in sources if isinstance(s, SqliteRows)]
    assert db_source.path == str(tmp_path / ".local/share/opencode/opencode.db")
    assert [t.table for t in db_source.tables] == ["session", "message", "part"]


def test_a_row_comes_with_its_related_rows(tmp_path: Path) -> None:
    """``related``: the rows of another table that point at this one (a message's parts), filtered by a JSON
    path, in that table's key order, as one JSON array column; none gives an empty array."""
    db = tmp_path / "a.db"
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("CREATE TABLE message (id TEXT PRIMARY KEY, updated INTEGER, data TEXT)")
    writer.execute("CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, data TEXT)")
    writer.executemany("INSERT INTO message VALUES (?, ?, ?)", [("m1", 1, "{}"), ("m2", 2, "{}")])
    parts = [("p3", "m1", '{"type": "text", "text": "b"}'), ("p1", "m1", '{"type": "text", "text": "a"}'),
             ("p2", "m1", '{"type": "tool", "text": "no"}'), ("p4", "m9", '{"type": "text", "text": "other"}')]
    writer.executemany("INSERT INTO part VALUES (?, ?, ?)", parts)
    related = RelatedSpec("texts", "part", "message_id", "id", "data", "id", (("$.type", "text"),))
    spec = [TableSpec("message", "updated", "id", ("id", "data"), (related,))]
    got = {r.data["row"]["id"]: r.data["row"] for r, _ in read(SqliteRows("s", "a", str(db), spec, {})) if r}
    assert set(got["m1"]) == {"id", "data", "texts"}
    assert [json.loads(p)["text"] for p in json.loads(got["m1"]["texts"])] == ["a", "b"]
    assert json.loads(got["m2"]["texts"]) == []
    writer.close()


def test_related_rows_can_be_matched_on_a_json_path_equal_to_a_column_of_the_row(tmp_path: Path) -> None:
    """``where_row``: only the related rows whose JSON path holds this row's value of a column (the parent's
    task part that names this child session); a torn related row matches nothing and costs nothing else."""
    db = tmp_path / "a.db"
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("CREATE TABLE session (id TEXT PRIMARY KEY, parent_id TEXT, updated INTEGER)")
    writer.execute("CREATE TABLE part (id TEXT PRIMARY KEY, session_id TEXT, data TEXT)")
    writer.executemany("INSERT INTO session VALUES (?, ?, ?)", [("p", None, 1), ("c1", "p", 2), ("c2", "p", 3)])
    parts = [("x1", "p", '{"type": "tool", "child": "c1", "call": "a"}'),
             ("x2", "p", '{"type": "tool", "child": "c2"'),  # torn
             ("x3", "p", '{"type": "text", "child": "c2"}'),
             ("x4", "p", '{"type": "tool", "child": "c2", "call": "b"}'),
             ("x5", "q", '{"type": "tool", "child": "c1", "call": "other parent"}')]
    writer.executemany("INSERT INTO part VALUES (?, ?, ?)", parts)
    related = RelatedSpec("calls", "part", "session_id", "parent_id", "data", "id", (("$.type", "tool"),),
                          (("$.child", "id"),))
    spec = [TableSpec("session", "updated", "id", (), (related,))]
    got = {r.data["row"]["id"]: [json.loads(p)["call"] for p in json.loads(r.data["row"]["calls"])]
           for r, _ in read(SqliteRows("s", "a", str(db), spec, {})) if r}
    assert got == {"p": [], "c1": ["a"], "c2": ["b"]}
    writer.close()


def test_a_related_read_the_schema_cannot_give_is_left_out_not_the_table(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    """Another version's schema without a column a related read names: the rows come without that column
    (said once), not an error on every query of the table; a missing table is still an error."""
    db = tmp_path / "a.db"
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("CREATE TABLE session (id TEXT PRIMARY KEY, updated INTEGER)")  # no parent_id
    writer.execute("CREATE TABLE part (id TEXT PRIMARY KEY, session_id TEXT, data TEXT)")
    writer.executemany("INSERT INTO session VALUES (?, ?)", [("s1", 1), ("s2", 2)])
    related = RelatedSpec("calls", "part", "session_id", "parent_id", "data", "id", (), (("$.child", "id"),))
    texts = RelatedSpec("texts", "part", "session_id", "id", "data", "id")
    source = SqliteRows("s", "a", str(db), [TableSpec("session", "updated", "id", (), (related, texts))], {})
    got = [r.data["row"] for r, _ in read(source) if r]
    assert [(r["id"], sorted(r)) for r in got] == [(s, ["id", "texts", "updated"]) for s in ("s1", "s2")]
    assert source.stats.errors == 0 and sum("read without calls" in m for m in caplog.messages) == 1
    gone = SqliteRows("s", "a", str(db), [TableSpec("nothing", "updated", "id", (), (related,))], {})
    assert read(gone) == [] and gone.stats.errors == 1
    writer.close()


def test_related_rows_are_read_only_for_the_rows_when_names(tmp_path: Path) -> None:
    """``when``: the related rows come only with rows whose own JSON column has the values (a user message),
    or is not a JSON object (its parser refuses it whole); the others get NULL, and no query is wasted."""
    db = tmp_path / "a.db"
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("CREATE TABLE message (id TEXT PRIMARY KEY, updated INTEGER, data TEXT)")
    writer.execute("CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, data TEXT)")
    messages = [("m1", 1, '{"role": "user"}'), ("m2", 2, '{"role": "assistant"}'), ("m3", 3, '{"role": "user", torn'),
                ("m4", 4, '{"other": 1}')]
    writer.executemany("INSERT INTO message VALUES (?, ?, ?)", messages)
    writer.executemany("INSERT INTO part VALUES (?, ?, ?)", [(f"p{m}", m, '{"type": "text", "text": "t"}')
                                                             for m in ("m1", "m2", "m3", "m4")])
    related = RelatedSpec("texts", "part", "message_id", "id", "data", "id", (("$.type", "text"),), (),
                          "data", (("$.role", "user"),))
    spec = [TableSpec("message", "updated", "id", ("id", "data"), (related,))]
    got = {r.data["row"]["id"]: r.data["row"]["texts"] for r, _ in read(SqliteRows("s", "a", str(db), spec, {})) if r}
    assert got["m2"] is None
    for name in ("m1", "m3", "m4"):  # a user message, a torn one, one that does not say: read
        assert [json.loads(p)["text"] for p in json.loads(got[name])] == ["t"]
    writer.close()


# -- kill -9 of a real collector process ---------------------------------------------------------------

OPENCODE_SCHEMA = """
CREATE TABLE session (id TEXT PRIMARY KEY, parent_id TEXT, directory TEXT, version TEXT, time_created INTEGER,
                      time_updated INTEGER);
CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, time_updated INTEGER,
                      data TEXT);
CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, time_created INTEGER,
                   time_updated INTEGER, data TEXT);
"""


def assistant(number: int) -> tuple[str, str, int, int, str]:
    data = {
        "role": "assistant",
        "parentID": "msg_user",
        "modelID": "m",
        "providerID": "p",
        "time": {"created": 1000 + number, "completed": 1001 + number},
        "finish": "stop",
        "tokens": {"input": number, "output": 1, "reasoning": 0, "cache": {"read": 0, "write": 0}},
    }
    return (f"msg_{number:05}", "ses_1", 1000 + number, 1001 + number, json.dumps(data))


def committed(state_db: Path, stream: str) -> dict[str, Any] | None:
    if not state_db.exists():
        return None
    try:
        with sqlite3.connect(f"file:{state_db}?mode=ro", uri=True, timeout=1) as conn:
            row = conn.execute("SELECT value FROM positions WHERE stream = ?", (stream,)).fetchone()
    except sqlite3.Error:
        return None
    return json.loads(row[0]) if row else None


def output(data_dir: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for f in sorted((data_dir / "output").glob("activity-*.jsonl"))
        for line in f.read_text().splitlines()
        if line.strip()
    ]


@pytest.mark.timeout(120)
def test_kill_9_while_the_database_grows(tmp_path: Path) -> None:
    """A collector daemon reads an OpenCode database that is being written, is killed with SIGKILL after
    committing some progress, and a fresh ``collect --once`` finishes: every row is reported exactly once,
    and the restart reads only what was not committed."""
    home = tmp_path / "home"
    db = home / ".local" / "share" / "opencode" / "opencode.db"
    db.parent.mkdir(parents=True)
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.executescript(OPENCODE_SCHEMA)
    writer.execute("INSERT INTO session VALUES ('ses_1', NULL, '/w', '1.18.33', 1000, 1000)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_COLLECTOR_", "XDG_"))}
    env.update(
        AGENT_COLLECTOR_HOME=str(home),
        AGENT_COLLECTOR_INGEST__PORT=str(free_port()),
        AGENT_COLLECTOR_COLLECTOR__POLL_INTERVAL_S="0.1",
        AGENT_COLLECTOR_COLLECTOR__BATCH_SIZE="50",
    )
    data_dir = home / ".local" / "share" / "agent-collector"
    daemon = subprocess.Popen(
        [sys.executable, "-m", "collector", "run"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    total, number = 3000, 0
    try:
        deadline = time.monotonic() + 60
        while committed(data_dir / "state" / "checkpoints.sqlite", "opencode:db:message") is None:
            assert time.monotonic() < deadline and daemon.poll() is None, "the daemon made no progress"
            batch = [assistant(n) for n in range(number, min(number + 100, total // 2))]
            writer.executemany("INSERT INTO message VALUES (?, ?, ?, ?, ?)", batch)
            number += len(batch)
            time.sleep(0.05)
        writer.executemany(
            "INSERT INTO message VALUES (?, ?, ?, ?, ?)", [assistant(n) for n in range(number, total // 2)]
        )  # more while it works
        number = total // 2
    finally:
        os.kill(daemon.pid, signal.SIGKILL)
        daemon.wait(timeout=10)
    assert daemon.returncode == -signal.SIGKILL
    before = committed(data_dir / "state" / "checkpoints.sqlite", "opencode:db:message")
    assert before is not None

    writer.executemany(
        "INSERT INTO message VALUES (?, ?, ?, ?, ?)", [assistant(n) for n in range(number, total)]
    )
    writer.close()
    done = subprocess.run(
        [sys.executable, "-m", "collector", "collect", "--once"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr

    entries = output(data_dir)
    ids = Counter(e["event.id"] for e in entries)
    assert max(ids.values()) == 1, "an entry was written twice"
    responses = Counter(e["gen_ai.response.id"] for e in entries if e["event.name"] == "llm.response")
    assert len(responses) == total and set(responses.values()) == {1}
    status = json.loads((data_dir / "state" / "status.json").read_text())
    reread = status["sources"]["opencode:db"]["records"]
    assert total - number <= reread < total, "the restart must read what came later, and not everything"


def test_rows_without_a_watermark_are_not_read_over_and_over(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    writer = make_db(db)
    writer.execute("INSERT INTO item VALUES ('r0', NULL, 'x')")
    source = SqliteRows("s", "a", str(db), SPEC, {})
    assert read(source) == [] and read(source) == []
    writer.execute("INSERT INTO item VALUES ('r1', 3, 'x')")
    assert rows(read(source)) == [("r1", 3)] and read(source) == []
    writer.close()


def test_only_the_rows_a_table_wants_are_read_and_the_position_moves_past_the_rest(tmp_path: Path) -> None:
    """``only``: rows whose JSON column has the value at the path, and those whose column is not a JSON
    object (for the parser to refuse: a torn row is quarantined and counted, not lost); the position moves
    past the others, so a restart from it reads none of them again."""
    db = tmp_path / "a.db"
    writer = make_db(db)
    bodies = ['{"type": "text"}', '{"type": "tool", "n": 1}', '{"type": "tool", torn', "[1]", None,
              '{"type": "step-start"}', '{"type": "tool", "n": 2}', '{"type": "text"}', '{"type": "patch"}']
    writer.executemany("INSERT INTO item VALUES (?, ?, ?)", [(f"r{i}", i, b) for i, b in enumerate(bodies)])
    spec = [TableSpec("item", "updated", "id", where_column="body", where=(("$.type", "tool"),))]
    source = SqliteRows("s", "a", str(db), spec, {}, batch_rows=3)
    items = read(source)
    assert rows(items) == [("r1", 1), ("r2", 2), ("r3", 3), ("r4", 4), ("r6", 6)]
    assert source.stats.records == 5
    last = items[-1][1]
    assert items[-1][0] is None and last.value["wm"] == 8 and last.value["key"] == "r8"  # past the last row
    writer.execute("""INSERT INTO item VALUES ('r9', 9, '{"type": "text"}'), ('r10', 10, '{"type": "tool"}')""")
    assert rows(read(SqliteRows("s", "a", str(db), spec, {last.stream: last.value}))) == [("r10", 10)]
    writer.close()


def test_a_row_record_needs_no_walk_at_the_boundary_unless_a_float_is_infinite(tmp_path: Path) -> None:
    """SQLite's values are within the boundary's bounds as they are (64-bit integers, UTF-8 text, one
    level of columns): the record says so; a blob comes as hex; an infinite float is left to the walk."""
    from collector.model.boundary import check_record

    db = tmp_path / "a.db"
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("CREATE TABLE item (id TEXT PRIMARY KEY, updated INTEGER, body, cost REAL)")
    writer.executemany("INSERT INTO item VALUES (?, ?, ?, ?)", [
        ("plain", 1, "é ✓ {\"a\": 1}", 0.5), ("blob", 2, b"\x00\xff", None), ("big", 3, 2**63 - 1, None),
        ("inf", 4, "x", float("inf"))])
    spec = [TableSpec("item", "updated", "id")]
    got = {r.data["row"]["id"]: r for r, _ in read(SqliteRows("s", "a", str(db), spec, {})) if r is not None}
    for name in ("plain", "blob", "big"):
        assert got[name].checked_data is got[name].data and check_record(got[name]) is got[name]
    assert got["blob"].data["row"]["body"] == "00ff" and got["big"].data["row"]["body"] == 2**63 - 1
    assert got["inf"].checked_data is None
    assert check_record(got["inf"]).data["row"]["cost"] == "inf"  # made safe by the boundary, as before
    writer.close()
