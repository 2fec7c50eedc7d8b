"""The dashboard's search over sessions: an SQLite FTS5 index of each session's labels (agent, session id,
project, repository, branch, models, tool names), one row per (session, term), in the usage store beside the
entries and kept in the same transaction as they are (``session_terms`` dedupes; a trigger copies each new term
into ``session_fts``). Nothing but labels the store already keeps: no prompt or tool text is stored, so none
is indexed, whatever content capture says.

Derived data: ``ensure`` builds it from the entries when its key in ``meta`` is not the current one."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

KEY = "1"
META = "search_index"
SCHEMA = """
CREATE TABLE IF NOT EXISTS session_terms (agent TEXT NOT NULL, session TEXT NOT NULL, term TEXT NOT NULL,
  PRIMARY KEY (agent, session, term)) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS session_fts USING fts5(agent UNINDEXED, session UNINDEXED, term);
CREATE TRIGGER IF NOT EXISTS session_terms_fts AFTER INSERT ON session_terms BEGIN
  INSERT INTO session_fts(agent, session, term) VALUES (new.agent, new.session, new.term);
END;
"""
_TERMS = ("e.agent", "e.session", "e.model", "e.tool", "e.repo", "e.branch")
_ADD = " UNION ".join(
    f"SELECT e.agent, e.session, {column} FROM events e NOT INDEXED "
    f"WHERE e.session IS NOT NULL AND {column} IS NOT NULL{{since}}" for column in _TERMS)
# batch_terms reads event_row's positions 5, 6, 10, 18, 23, 24: agent, session, model, tool, repo, branch
# (tests/usage/test_search_index.py checks each through the store)
_PROJECTS = ("SELECT s.agent, s.session, s.project FROM sessions s WHERE s.project IS NOT NULL AND s.last_ns >= ?")
MAX_WORDS = 8


def ensure(db: sqlite3.Connection) -> None:
    """Create the index; (re)build it from the entries and sessions when its key is not the current one."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (META,)).fetchone()
    current = row is not None and row[0] == KEY
    if not current:
        db.execute("DROP TABLE IF EXISTS session_fts")
        db.execute("DROP TABLE IF EXISTS session_terms")
    db.executescript(SCHEMA)
    if current:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("INSERT OR IGNORE INTO session_terms " + _ADD.format(since=""))
        db.execute("INSERT OR IGNORE INTO session_terms " + _PROJECTS, (0,))
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (META, KEY))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def batch_terms(rows: Iterable[Sequence[Any]]) -> set[tuple[str, str, str]]:
    """The terms of a batch's new rows as ``event_row`` binds them (``''`` for none): its agent, session id,
    model, tool, repository and branch, per session."""
    labels = {(r[5], r[6], r[10], r[18], r[23], r[24]) for r in rows}  # a batch has a handful of distinct ones
    return {(one[0], one[1], term) for one in labels if one[1] for term in one if term}


def add_since(db: sqlite3.Connection, terms: Iterable[tuple[str, str, str]],
              sessions: Iterable[Sequence[Any]] = ()) -> None:
    """Inside a batch's transaction, after its sessions' upsert: its ``batch_terms`` and the project ``sessions``
    keeps for each session of the batch (its ``session_row``s; one key lookup each)."""
    db.executemany("INSERT OR IGNORE INTO session_terms VALUES(?, ?, ?)", terms)
    db.executemany("INSERT OR IGNORE INTO session_terms SELECT agent, session, project FROM sessions "
                   "WHERE agent = ? AND session = ? AND project IS NOT NULL", [(s[0], s[1]) for s in sessions])


def prune(db: sqlite3.Connection) -> None:
    """Inside the retention's transaction, after the sessions it dropped: their terms go."""
    gone = "NOT EXISTS (SELECT 1 FROM sessions s WHERE s.agent = {t}.agent AND s.session = {t}.session)"
    db.execute(f"DELETE FROM session_fts WHERE {gone.format(t='session_fts')}")
    db.execute(f"DELETE FROM session_terms WHERE {gone.format(t='session_terms')}")


def match_expression(text: str) -> str | None:
    """The user's words as an FTS5 query: each a quoted prefix (so ``sonnet``, ``acme/shop`` or ``01a2`` work and
    no word is FTS5 syntax), all of them required; None when there is no word."""
    words = text.split()[:MAX_WORDS]
    return " ".join('"' + w.replace('"', '""') + '"*' for w in words) or None


def matching(db: sqlite3.Connection, text: str) -> frozenset[tuple[str, str]] | None:
    """The (agent, session) pairs whose terms hold every word; None when the store has no index yet (a store the
    daemon has not opened since, read without opening it for writing)."""
    expression = match_expression(text)
    if expression is None:
        return None
    try:
        rows = db.execute("SELECT DISTINCT agent, session FROM session_fts WHERE session_fts MATCH ?", (expression,))
        return frozenset((str(a), str(s)) for a, s in rows)
    except sqlite3.OperationalError as err:
        if "no such table" in str(err):
            return None
        raise
