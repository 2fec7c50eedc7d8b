"""The sessions' search index on the five agents' fixture homes collected by the real ``collect --once``: a
tool name, a model, a session id's start or a project finds exactly the sessions the entries say, every word
is required, FTS5 syntax in the words is only text, the index is rebuilt the same from the entries, follows
new batches and loses the sessions retention drops; a store without it falls back to the labels."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from support.collect_once import collect_cli
from support.usage import merged_fixtures, store_db

from collector.paths import Paths
from collector.usage.prices import PriceTable
from collector.usage.search_index import match_expression, matching
from collector.usage.sessions import SessionQuery, session_rows
from collector.usage.store import UsageStore, connect

UTC = ZoneInfo("UTC")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Paths:
    paths = merged_fixtures(tmp_path_factory.mktemp("search"))
    collect_cli(paths)
    return paths


def _with(db: sqlite3.Connection, sql: str, *params: object) -> frozenset[tuple[str, str]]:
    return frozenset((str(a), str(s)) for a, s in db.execute(sql, params))


def test_words_find_the_sessions_the_entries_name(home: Paths) -> None:
    db = store_db(home)
    try:
        tools = [t for (t,) in db.execute("SELECT DISTINCT tool FROM events WHERE tool IS NOT NULL ORDER BY tool")]
        assert len(tools) >= 3
        for tool in tools:
            truth = _with(db, "SELECT DISTINCT agent, session FROM events WHERE tool = ?", tool)
            found = matching(db, tool)
            assert found is not None and truth <= found, tool  # a word of the name also finds longer names
        truth = _with(db, "SELECT DISTINCT agent, session FROM events WHERE model LIKE 'qwen3%'")
        assert matching(db, "qwen3") == truth and truth
        agent, session = db.execute("SELECT agent, session FROM sessions ORDER BY session LIMIT 1").fetchone()
        assert (agent, session) in (matching(db, session[:8]) or set())
        both = matching(db, f"codex {tools[0]}")
        assert both is not None and all(a == "codex" for a, _ in both)
        for hostile in ('"', 'a" OR "b', "NEAR(", "*", "-x", "col:x", "AND"):
            assert matching(db, hostile) is not None, hostile
        assert matching(db, "   ") is None and match_expression('a"b') == '"a""b"*'
        listed = session_rows(db, SessionQuery(since_ns=0, until_ns=2**62, text="qwen3", limit=200), UTC, PriceTable())
        assert {(r["agent"], r["session"]) for r in listed["rows"]} == truth
    finally:
        db.close()


def _copy(home: Paths, tmp: Path) -> Path:
    copy = tmp / "usage.sqlite"
    source = sqlite3.connect(home.data_dir / "usage.sqlite")
    source.backup(target := sqlite3.connect(copy))
    source.close()
    target.close()
    return copy


def test_rebuilt_the_same_follows_batches_and_retention(home: Paths, tmp_path: Path) -> None:
    copy = _copy(home, tmp_path)
    db = sqlite3.connect(copy)
    before = db.execute("SELECT * FROM session_terms ORDER BY 1, 2, 3").fetchall()
    fts = db.execute("SELECT COUNT(*) FROM session_fts").fetchone()[0]
    db.execute("DELETE FROM meta WHERE key = 'search_index'")
    db.commit()
    db.close()
    store = UsageStore(copy, retention_days=3650)
    t = int(2e18)
    store.add([{"event.id": "n1", "event.name": "tool.call", "gen_ai.agent.type": "codex", "time_unix_nano": t,
                "gen_ai.session.id": "fresh-one", "gen_ai.tool.name": "zebra_tool", "workspace.path": "/w/shop",
                "gen_ai.request.model": "okapi-7", "vcs.repository.name": "giraffe", "vcs.ref.head.name": "feat-yak"}])
    db = connect(copy, readonly=True)
    try:
        kept = db.execute("SELECT * FROM session_terms WHERE session != 'fresh-one' ORDER BY 1, 2, 3").fetchall()
        assert kept == before
        added = db.execute("SELECT COUNT(*) FROM session_fts").fetchone()[0] - fts
        assert added == 7, "agent, id, tool, project, model, repo, branch"
        for word in ("zebra", "shop", "okapi", "giraffe", "yak", "fresh"):
            assert matching(db, word) == {("codex", "fresh-one")}, word
    finally:
        db.close()
    store.prune(now=t / 1e9 + 86400 * 3650 - 86400 * 30)  # everything but the new one is older than the retention
    store.close()
    db = connect(copy, readonly=True)
    try:
        assert {s for _, s in db.execute("SELECT agent, session FROM session_terms")} == {"fresh-one"}
        assert matching(db, "codex") == {("codex", "fresh-one")}
    finally:
        db.close()


def test_without_the_index_the_labels_are_searched(home: Paths, tmp_path: Path) -> None:
    copy = _copy(home, tmp_path)
    db = sqlite3.connect(copy)
    db.execute("DROP TABLE session_fts")
    db.commit()
    db.close()
    db = connect(copy, readonly=True)
    try:
        assert matching(db, "qwen3") is None
        rows = session_rows(db, SessionQuery(since_ns=0, until_ns=2**62, text="qwen3", limit=200), UTC,
                            PriceTable())["rows"]
    finally:
        db.close()
    assert rows and all("qwen3" in " ".join(r["models"]) for r in rows)
