"""The dashboard's list of sessions on the fixture homes of all five agents collected by the real
``collect --once``: every session's numbers equal ``report session ID``'s, the filters keep exactly the sessions
that match, the orders hold, the pages cover the list once, the store without a current sessions' rollup gives
the same rows, and the reads use their indexes (EXPLAIN QUERY PLAN: no scan of ``events``, ``slots`` or
``session_usage``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from support.collect_once import collect_cli
from support.usage import merged_fixtures, store_db

from collector.paths import Paths
from collector.usage.activity import activity
from collector.usage.prices import PriceTable
from collector.usage.session_detail import build_session
from collector.usage.sessions import SessionQuery, session_rows, top
from collector.usage.store import UsageStore, connect
from collector.usage.timeline import timeline

UTC = ZoneInfo("UTC")
APART = ("cost_usd", "first_time", "last_time", "cost_differs", "agent_cost_usd")  # compared apart (floats)
ALL = SessionQuery(since_ns=0, until_ns=2**62, limit=200)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Paths:
    paths = merged_fixtures(tmp_path_factory.mktemp("sessions"))
    collect_cli(paths)
    return paths


def _rows(paths: Paths, query: SessionQuery = ALL) -> dict[str, Any]:
    db = store_db(paths)
    try:
        return session_rows(db, query, UTC, PriceTable())
    finally:
        db.close()


def test_every_session_has_the_numbers_of_its_report(home: Paths) -> None:
    listed = _rows(home)
    db = store_db(home)
    try:
        stored = db.execute("SELECT COUNT(*) FROM sessions WHERE session IN (SELECT session FROM session_usage)")
        assert listed["total"] == stored.fetchone()[0] > 10
        assert {r["agent"] for r in listed["rows"]} == {"claude-code", "codex", "gemini-cli", "qwen-code", "opencode"}
        for row in listed["rows"]:
            report = build_session(db, row["session"], UTC, PriceTable())["total"]
            for key in ("calls", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
                        "tool_calls", "tool_failures", "errors"):
                assert row[key] == report[key], (row["session"], key)
            assert (row["cost_usd"] is None) == (report["cost_usd"] is None)
            assert row["cost_usd"] == pytest.approx(report["cost_usd"], abs=1e-9), row["session"]
            first, last = db.execute("SELECT first_ns, last_ns FROM sessions WHERE agent = ? AND session = ?",
                                     (row["agent"], row["session"])).fetchone()
            assert row["duration_s"] == round((last - first) / 1e9, 3) and row["status"] != "live"
    finally:
        db.close()


def test_filters_keep_exactly_the_matching_sessions(home: Paths) -> None:
    every = _rows(home)["rows"]
    for agent in ("codex", "opencode"):
        only = _rows(home, SessionQuery(since_ns=0, until_ns=2**62, agent=agent, limit=200))
        assert only["total"] == sum(r["agent"] == agent for r in every) > 0
        assert {r["agent"] for r in only["rows"]} == {agent}
    model = every[0]["model"]
    by_model = _rows(home, SessionQuery(since_ns=0, until_ns=2**62, model=model, limit=200))["rows"]
    assert {r["key"] for r in by_model} == {r["key"] for r in every if model in r["models"]}
    project = every[0]["project"].rsplit("/", 1)[-1]
    by_project = _rows(home, SessionQuery(since_ns=0, until_ns=2**62, project=project, limit=200))["rows"]
    assert {r["key"] for r in by_project} == {r["key"] for r in every if r["project"].endswith("/" + project)}
    assert _rows(home, SessionQuery(since_ns=0, until_ns=2**62, branch="no-such-branch"))["total"] == 0
    last = max(r["last_unix_nano"] for r in every)
    late = _rows(home, SessionQuery(since_ns=last, until_ns=2**62, limit=200))["rows"]
    assert late and all(r["last_unix_nano"] >= last for r in late)
    assert _rows(home, SessionQuery(since_ns=0, until_ns=min(r["start_unix_nano"] for r in every)))["total"] == 0


@pytest.mark.parametrize("sort", ["start", "cost", "tokens", "duration", "tool_failures", "calls"])
def test_orders_and_pages(home: Paths, sort: str) -> None:
    field = {"start": "start_unix_nano", "cost": "cost_usd", "tokens": "total_tokens", "duration": "duration_s",
             "tool_failures": "tool_failures", "calls": "calls"}[sort]
    total = _rows(home)["total"]
    seen: list[dict[str, Any]] = []
    for offset in range(0, total, 7):
        seen += _rows(home, SessionQuery(since_ns=0, until_ns=2**62, sort=sort, limit=7, offset=offset))["rows"]
    assert len(seen) == len({r["key"] for r in seen}) == total, "every session once"
    values = [r[field] if r[field] is not None else -1 for r in seen]
    assert values == sorted(values, reverse=True)
    ascending = _rows(home, SessionQuery(since_ns=0, until_ns=2**62, sort=sort, descending=False, limit=200))["rows"]
    assert [r[field] if r[field] is not None else -1 for r in ascending] == sorted(values)


def test_without_the_sessions_rollup_the_rows_are_the_same(home: Paths, tmp_path: Path) -> None:
    copy = tmp_path / "usage.sqlite"
    source = sqlite3.connect(home.data_dir / "usage.sqlite")
    source.backup(target := sqlite3.connect(copy))
    source.close()
    target.execute("DELETE FROM meta WHERE key = 'session_rollup'")
    target.commit()
    target.close()
    db = connect(copy, readonly=True)
    try:
        fallback = session_rows(db, ALL, UTC, PriceTable())
    finally:
        db.close()
    rolled = _rows(home)
    assert fallback["total"] == rolled["total"]
    for a, b in zip(fallback["rows"], rolled["rows"], strict=True):
        assert {k: v for k, v in a.items() if k not in APART} == {k: v for k, v in b.items() if k not in APART}
        assert a["cost_usd"] == pytest.approx(b["cost_usd"], abs=1e-9)
        assert a["agent_cost_usd"] == pytest.approx(b["agent_cost_usd"], abs=1e-9)


def test_the_sessions_rollup_follows_writes_and_is_rebuilt_when_its_key_changes(home: Paths, tmp_path: Path) -> None:
    copy = tmp_path / "usage.sqlite"
    source = sqlite3.connect(home.data_dir / "usage.sqlite")
    source.backup(target := sqlite3.connect(copy))
    source.close()
    before = target.execute("SELECT * FROM session_usage ORDER BY 1, 2, 3, 4, 5, 6, 7, 8").fetchall()
    target.execute("UPDATE meta SET value = 'old' WHERE key = 'session_rollup'")
    target.execute("DELETE FROM session_usage")
    target.commit()
    target.close()
    store = UsageStore(copy)  # opening rebuilds it from the entries
    t = 2_000_000_000 * 10**9
    store.add([{"event.id": "new-1", "event.name": "llm.response", "gen_ai.agent.type": "codex",
                "time_unix_nano": t, "gen_ai.session.id": "fresh", "gen_ai.response.model": "gpt-5",
                "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 3}])
    store.close()
    db = connect(copy, readonly=True)
    try:
        after = db.execute("SELECT * FROM session_usage WHERE session != 'fresh' ORDER BY 1, 2, 3, 4, 5, 6, 7, 8")
        assert after.fetchall() == before
        fresh = session_rows(db, SessionQuery(since_ns=t, until_ns=t + 1), UTC, PriceTable())["rows"]
    finally:
        db.close()
    assert [(r["session"], r["calls"], r["total_tokens"]) for r in fresh] == [("fresh", 1, 13)]


def test_top_sessions_and_activity_add_up(home: Paths) -> None:
    every = _rows(home)["rows"]
    db = store_db(home)
    try:
        best = top(db, ALL, UTC, PriceTable(), 3)
        heat = activity(db, 0, 2**62, UTC)
        calls = db.execute("SELECT COUNT(*) FROM events WHERE name = 'llm.response'").fetchone()[0]
    finally:
        db.close()
    assert [r["key"] for r in best["tokens"]] == [r["key"] for r in sorted(
        every, key=lambda r: r["total_tokens"], reverse=True)[:3]]
    assert best["cost"][0]["cost_usd"] == max(r["cost_usd"] or 0 for r in every)
    assert sum(map(sum, heat["by_hour"])) == sum(d["calls"] for d in heat["by_day"]) == calls > 0


def _plans(db: sqlite3.Connection, run: Any) -> list[tuple[str, list[str]]]:
    seen: list[str] = []
    db.set_trace_callback(seen.append)
    run()
    db.set_trace_callback(None)
    return [(sql, [row[3] for row in db.execute("EXPLAIN QUERY PLAN " + sql)])
            for sql in seen if sql.lstrip().upper().startswith("SELECT")]


def test_the_reads_use_their_indexes(home: Paths) -> None:
    """Every read of the list, the timeline and the activity goes by an index or a key range: no full scan of
    the entries, the quarter hours or the sessions' rollup (the small ``models`` and ``sessions`` tables of the
    price lookup aside)."""
    db = store_db(home)
    try:
        row = session_rows(db, ALL, UTC, PriceTable())["rows"][0]
        plans = _plans(db, lambda: (session_rows(db, ALL, UTC, PriceTable()),
                                    session_rows(db, SessionQuery(since_ns=0, until_ns=2**62, agent="codex"), UTC,
                                                 PriceTable()),
                                    timeline(db, row["agent"], row["session"], UTC, PriceTable(), False),
                                    activity(db, 0, 2**62, UTC)))
    finally:
        db.close()
    joined = "\n".join(" | ".join(p) for _, p in plans)
    assert "SEARCH s USING INDEX sessions_last" in joined and "SEARCH u USING PRIMARY KEY (agent=? AND session=?)" \
        in joined, joined
    assert "SEARCH u USING PRIMARY KEY (agent=?)" in joined, "one agent: the rollup's key range of that agent"
    assert "USING INDEX events_time (name=? AND time_ns>? AND time_ns<?)" in joined
    assert "SEARCH slots USING PRIMARY KEY (slot>? AND slot<?)" in joined
    for sql, plan in plans:
        for step in plan:
            assert not step.startswith(("SCAN events", "SCAN e", "SCAN slots", "SCAN r", "SCAN session_usage",
                                        "SCAN u")), (sql, plan)
