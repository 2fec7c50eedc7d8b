"""The store's rollup: counted entries summed per quarter hour (UTC), agent, session, model, provider,
input band, repository, branch and working tree, kept up to date in the same transaction as the entries.
Reports read it instead of the entries: a quarter hour is the finest a time zone needs, and the band is the
finest a long-context price tier needs, so the sums are exactly what a pass over the entries would give (a
test compares).

A band is how many of ``EDGES`` a call's input exceeds; ``EDGES`` holds every tier threshold of the
bundled price table (a test checks that). A price table with a threshold not in it makes the reports
fall back to the entries (``usable``), so a new tier is never priced wrong. The rollup is derived data:
``ensure`` drops and rebuilds it from the entries when its ``KEY`` (the edges and ``LAYOUT``, the version of its
columns) is not the one in ``meta``: a store from before it, from before the git columns, or with other edges."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

SLOT_NS = 900 * 10**9
EDGES = (32_000, 100_000, 128_000, 199_999, 200_000, 256_000, 272_000, 512_000, 524_288)
EDGES_KEY = ",".join(map(str, EDGES))
LAYOUT = 2  # 2: repo, branch and worktree in the key
KEY = f"{EDGES_KEY};{LAYOUT}"

SCHEMA = """
CREATE TABLE IF NOT EXISTS slots (
  slot INTEGER NOT NULL, agent TEXT NOT NULL, session TEXT NOT NULL, model TEXT NOT NULL,
  provider TEXT NOT NULL, band INTEGER NOT NULL, repo TEXT NOT NULL, branch TEXT NOT NULL, worktree TEXT NOT NULL,
  calls INTEGER NOT NULL, input INTEGER NOT NULL, cache_read INTEGER NOT NULL, cache_write INTEGER NOT NULL,
  output INTEGER NOT NULL, reasoning INTEGER NOT NULL, tool_calls INTEGER NOT NULL,
  tool_failures INTEGER NOT NULL, errors INTEGER NOT NULL, agent_cost REAL, agent_cost_calls INTEGER NOT NULL,
  a_input INTEGER NOT NULL, a_cache_read INTEGER NOT NULL, a_cache_write INTEGER NOT NULL,
  a_output INTEGER NOT NULL, first_ns INTEGER NOT NULL, last_ns INTEGER NOT NULL,
  PRIMARY KEY (slot, agent, session, model, provider, band, repo, branch, worktree)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS slots_session ON slots(agent, session);
"""

COUNTED = ("(e.name IN ('llm.response', 'tool.call', 'error') "
           "OR (e.name = 'tool.result' AND e.tool_status = 'error'))")
_BAND = "(" + " + ".join(f"(e.input > {edge})" for edge in EDGES) + ")"
_SUMS = """
  SUM(e.name = 'llm.response'), SUM(e.input), SUM(e.cache_read), SUM(e.cache_write), SUM(e.output),
  SUM(e.reasoning), SUM(e.name = 'tool.call'), SUM(e.name = 'tool.result'), SUM(e.name = 'error'),
  SUM(e.agent_cost_usd), COUNT(e.agent_cost_usd),
  COALESCE(SUM(CASE WHEN e.agent_cost_usd IS NOT NULL THEN e.input END), 0),
  COALESCE(SUM(CASE WHEN e.agent_cost_usd IS NOT NULL THEN e.cache_read END), 0),
  COALESCE(SUM(CASE WHEN e.agent_cost_usd IS NOT NULL THEN e.cache_write END), 0),
  COALESCE(SUM(CASE WHEN e.agent_cost_usd IS NOT NULL THEN e.output END), 0),
  MIN(e.time_ns), MAX(e.time_ns)"""
_ADD = ", ".join(f"{c} = {c} + excluded.{c}" for c in (
    "calls", "input", "cache_read", "cache_write", "output", "reasoning", "tool_calls", "tool_failures", "errors",
    "agent_cost_calls", "a_input", "a_cache_read", "a_cache_write", "a_output"))
_UPSERT = f"""
INSERT INTO slots
SELECT e.time_ns / {SLOT_NS}, e.agent, COALESCE(e.session, ''), COALESCE(e.model, ''), COALESCE(e.provider, ''),
       {_BAND}, COALESCE(e.repo, ''), COALESCE(e.branch, ''), COALESCE(e.worktree, ''), {_SUMS}
FROM events e NOT INDEXED
WHERE {COUNTED}{{since}}
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
ON CONFLICT(slot, agent, session, model, provider, band, repo, branch, worktree) DO UPDATE SET {_ADD},
  agent_cost = CASE WHEN excluded.agent_cost IS NULL THEN agent_cost
                    ELSE COALESCE(agent_cost, 0) + excluded.agent_cost END,
  first_ns = MIN(first_ns, excluded.first_ns), last_ns = MAX(last_ns, excluded.last_ns)
"""


def ensure(db: sqlite3.Connection) -> None:
    """Create the rollup; (re)build it when the store has entries it does not cover or its layout is older."""
    row = db.execute("SELECT value FROM meta WHERE key = 'rollup_edges'").fetchone()
    current = row is not None and row[0] == KEY
    if not current:
        db.execute("DROP TABLE IF EXISTS slots")  # an older layout's columns: CREATE IF NOT EXISTS would keep them
    db.executescript(SCHEMA)
    if not current:
        rebuild(db)


def rebuild(db: sqlite3.Connection) -> None:
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("DELETE FROM slots")
        db.execute(_UPSERT.format(since=""))
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('rollup_edges', ?)", (KEY,))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def last_id(db: sqlite3.Connection) -> int:
    """Before inserting a batch (inside its transaction): the entries it adds will have ids above this."""
    return int(db.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0])


def add_since(db: sqlite3.Connection, last: int) -> None:
    """After inserting the batch: add the entries it added (``events.id`` above ``last``) to the rollup.
    ``events`` is a rowid table, so a new row's id is above every id it had: a range, no lookups. NOT
    INDEXED keeps it that range: on its own SQLite chose ``events_time`` for the names of ``COUNTED`` and
    walked every counted entry of the store for each batch (the rowid range stays usable)."""
    db.execute(_UPSERT.format(since=" AND e.id > ?"), (last,))


def add_rows(db: sqlite3.Connection, ids: list[int], remove: bool = False) -> None:
    """Add the rows ``ids`` to the rollup, or take them out of it (``remove``; their first and last times
    stay): what a correction of stored rows does around its UPDATE (collector.usage.corrections)."""
    sql = _UPSERT.format(since=f" AND e.id IN ({','.join('?' * len(ids))})")
    db.execute(sql.replace("+ excluded.", "- excluded.") if remove else sql, ids)


def usable(db: sqlite3.Connection, thresholds: Iterable[int]) -> bool:
    """Can reports read the rollup? (It exists, is current, and the price table's tiers fit its bands.)"""
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'rollup_edges'").fetchone()
    except sqlite3.Error:
        return False
    return row is not None and row[0] == KEY and set(thresholds) <= set(EDGES)


def representative(band: int) -> int:
    """An input size inside ``band`` (every tier decision is the same for all of the band's calls)."""
    return EDGES[band - 1] + 1 if band > 0 else 0
