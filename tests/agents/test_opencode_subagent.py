"""OpenCode's sub-agents run as child sessions: the link to the task call (looked up in the real captured
database) and the correlator's folding of a child session into its parent, also across a restart.
The whole path over the real capture is tests/agents/test_fixtures.py (case opencode/subagent, with and without
the hook spool) and tests/exporters/test_backfill_traces.py (its spans under the task call)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

from support import FIXTURES

from collector.agents.opencode_links import task_call
from collector.pipeline.correlate import Correlator

CASE = FIXTURES / "opencode" / "subagent" / "home" / ".local" / "share" / "opencode"
PARENT, CHILD = "ses_dcefc75f3ffeZmzsmeWtX99uuv", "ses_dcefc6184ffe5JvQgQ1JwZ2JkM"
TASK_CALL = "call_26d35edd900c449b8c0fce61"


def test_the_task_call_is_found_in_the_database(tmp_path: Path) -> None:
    shutil.copytree(CASE, tmp_path / "db")
    db = str(tmp_path / "db" / "opencode.db")
    assert task_call(db, PARENT, CHILD) == TASK_CALL
    assert task_call(db, PARENT, "ses_unknown") is None
    assert task_call(db, CHILD, CHILD) is None, "only the parent's parts name the child"
    assert task_call(str(tmp_path / "missing.db"), PARENT, CHILD) is None


def test_a_miss_is_asked_again_once_the_database_changed(tmp_path: Path) -> None:
    """Read live, the child's session row can come before OpenCode wrote the task part: no link yet, and a
    later look (after the write) finds it."""
    shutil.copytree(CASE, tmp_path / "db")
    db = str(tmp_path / "db" / "opencode.db")
    where = "FROM part WHERE session_id = ? AND instr(data, ?) > 0"
    with sqlite3.connect(db) as con:
        rows = con.execute(f"SELECT * {where}", (PARENT, CHILD)).fetchall()
        con.execute(f"DELETE {where}", (PARENT, CHILD))
    assert rows and task_call(db, PARENT, CHILD) is None
    with sqlite3.connect(db) as con:
        con.executemany(f"INSERT INTO part VALUES ({', '.join('?' * len(rows[0]))})", rows)
    assert task_call(db, PARENT, CHILD) == TASK_CALL


def _entry(name: str, ms: int, session: str, **fields: Any) -> dict[str, Any]:
    return {"event.name": name, "event.id": f"{name}-{ms}", "time_unix_nano": ms * 10**6,
            "gen_ai.agent.type": "opencode", "gen_ai.session.id": session, **fields}


def test_a_child_session_folds_into_its_parent_across_a_restart() -> None:
    first = Correlator()
    first.apply(_entry("user.prompt", 1, PARENT, **{"gen_ai.turn.id": "T"}))
    first.apply(_entry("tool.call", 2, PARENT, **{"gen_ai.tool.call.id": TASK_CALL, "gen_ai.tool.type": "agent"}))
    start = _entry("session.start", 3, CHILD, **{"gen_ai.session.parent.id": PARENT})
    first.apply(start)
    assert start["gen_ai.session.id"] == CHILD and start["gen_ai.subagent.parent_tool_call.id"] == TASK_CALL
    saved = {key: state for key, state, _ in first.changes()}

    again = Correlator(load=saved.get)  # a restart: the sessions come back from the store
    prompt = _entry("user.prompt", 4, CHILD, **{"gen_ai.turn.id": "child-turn"})
    response = _entry("llm.response", 5, CHILD, **{"gen_ai.turn.id": "child-turn"})
    status = _entry("session.status", 6, CHILD, **{"session.status": "idle"})
    for entry in (prompt, response, status):
        again.apply(entry)
    for entry in (prompt, response):
        assert (entry["gen_ai.session.id"], entry["gen_ai.turn.id"], entry["gen_ai.agent.id"],
                entry["gen_ai.agent.scope"], entry["gen_ai.subagent.parent_tool_call.id"]) == (
                    PARENT, "T", CHILD, "subagent", TASK_CALL)
    assert prompt["event.name"] == "subagent.start", "the task prompt is the sub-agent's start, not a user turn"
    assert status["gen_ai.session.id"] == CHILD, "the child's own session events stay in its session"


def test_the_child_session_row_comes_with_its_task_call(tmp_path: Path, monkeypatch: Any) -> None:
    """The definition reads the child's session row with the parent's tool parts that name it (``related``
    ``task_parts``), so its session.start names the task call with no query of its own; a row without that
    column (a definition of one's own) still gets it from the database."""
    import asyncio
    from dataclasses import replace

    from collector.agents import opencode, opencode_links
    from collector.definitions import load_definitions
    from collector.sources.sqlite_rows import SqliteRows
    from collector.sources.sqlite_specs import table_specs

    shutil.copytree(CASE, tmp_path / "db")
    db = str(tmp_path / "db" / "opencode.db")
    (spec,) = [s for s in load_definitions(None).agents["opencode"].raw["sources"] if s["kind"] == "sqlite"]
    source = SqliteRows("t", "opencode", db, table_specs(spec["tables"])[:1], {})

    async def read() -> list[Any]:
        return [record async for record, _ in source.read() if record is not None]

    child = next(r for r in asyncio.run(read()) if r.data["row"]["id"] == CHILD)
    asked: list[tuple[str, str]] = []
    monkeypatch.setattr(opencode, "task_call", lambda path, parent, session: asked.append((parent, session)))
    (start,) = opencode.parse(child)
    assert start.attributes["gen_ai.subagent.parent_tool_call.id"] == TASK_CALL and asked == []
    row = {k: v for k, v in child.data["row"].items() if k != "task_parts"}
    monkeypatch.setattr(opencode, "task_call", opencode_links.task_call)
    (start,) = opencode.parse(replace(child, data={"table": "session", "row": row}, checked_data=None))
    assert start.attributes["gen_ai.subagent.parent_tool_call.id"] == TASK_CALL
    assert opencode_links.call_in("[]", CHILD) is None and opencode_links.call_in("not json", CHILD) is None
