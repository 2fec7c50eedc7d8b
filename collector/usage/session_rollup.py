"""The sessions' rollup (``session_usage``): counted entries summed per session, UTC day, model, provider,
input band, repository and branch, kept in the same transaction as the entries (after ``rollup.add_since``),
like ``collector.usage.rollup`` but without its quarter hours: a store of 300,000 entries holds some 9,000 of
these rows for 2,000 sessions where ``slots`` holds 52,000, so the dashboard's list of sessions sums and
sorts every session in one short read and prices only the page it shows (docs/dashboard.md).

Derived data: ``ensure`` builds it from the entries when its key in ``meta`` (the rollup's edges and
``LAYOUT``) is not the current one; retention drops its days with the entries'."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from collector.usage.rollup import COUNTED, EDGES
from collector.usage.rollup import KEY as SLOTS_KEY

LAYOUT = 2  # 2: the agent's own cost
KEY = f"{SLOTS_KEY};sessions {LAYOUT}"
META = "session_rollup"
DAY_NS = 86_400 * 10**9

SCHEMA = """
CREATE TABLE IF NOT EXISTS session_usage (
  agent TEXT NOT NULL, session TEXT NOT NULL, day INTEGER NOT NULL, model TEXT NOT NULL, provider TEXT NOT NULL,
  band INTEGER NOT NULL, repo TEXT NOT NULL, branch TEXT NOT NULL,
  calls INTEGER NOT NULL, input INTEGER NOT NULL, cache_read INTEGER NOT NULL, cache_write INTEGER NOT NULL,
  output INTEGER NOT NULL, reasoning INTEGER NOT NULL, tool_calls INTEGER NOT NULL, tool_failures INTEGER NOT NULL,
  errors INTEGER NOT NULL, agent_cost REAL, agent_cost_calls INTEGER NOT NULL, first_ns INTEGER NOT NULL,
  last_ns INTEGER NOT NULL,
  PRIMARY KEY (agent, session, day, model, provider, band, repo, branch)
) WITHOUT ROWID;
"""
_BAND = "(" + " + ".join(f"(e.input > {edge})" for edge in EDGES) + ")"
_SUMS = ("calls", "input", "cache_read", "cache_write", "output", "reasoning", "tool_calls", "tool_failures", "errors",
         "agent_cost_calls")
_UPSERT = f"""
INSERT INTO session_usage
SELECT e.agent, e.session, e.time_ns / {DAY_NS}, COALESCE(e.model, ''), COALESCE(e.provider, ''), {_BAND},
       COALESCE(e.repo, ''), COALESCE(e.branch, ''),
       SUM(e.name = 'llm.response'), SUM(e.input), SUM(e.cache_read), SUM(e.cache_write), SUM(e.output),
       SUM(e.reasoning), SUM(e.name = 'tool.call'), SUM(e.name = 'tool.result'), SUM(e.name = 'error'),
       SUM(e.agent_cost_usd), COUNT(e.agent_cost_usd), MIN(e.time_ns), MAX(e.time_ns)
FROM events e NOT INDEXED
WHERE {COUNTED} AND e.session IS NOT NULL{{since}}
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
ON CONFLICT(agent, session, day, model, provider, band, repo, branch) DO UPDATE SET
  {", ".join(f"{c} = {c} + excluded.{c}" for c in _SUMS)},
  agent_cost = CASE WHEN excluded.agent_cost IS NULL THEN agent_cost
                    ELSE COALESCE(agent_cost, 0) + excluded.agent_cost END,
  first_ns = MIN(first_ns, excluded.first_ns), last_ns = MAX(last_ns, excluded.last_ns)
"""


def ensure(db: sqlite3.Connection) -> None:
    """Create the table; (re)build it from the entries when its key is not the current one."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (META,)).fetchone()
    current = row is not None and row[0] == KEY
    if not current:
        db.execute("DROP TABLE IF EXISTS session_usage")
    db.executescript(SCHEMA)
    if current:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(_UPSERT.format(since=""))
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (META, KEY))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def add_since(db: sqlite3.Connection, last: int) -> None:
    """Inside a batch's transaction, after its rows went in: add those above ``last`` (a rowid range)."""
    db.execute(_UPSERT.format(since=" AND e.id > ?"), (last,))


def add_rows(db: sqlite3.Connection, ids: list[int], remove: bool = False) -> None:
    """Add the rows ``ids`` to the rollup, or take them out of it (``remove``; their first and last times
    stay): what a correction of stored rows does around its UPDATE (collector.usage.corrections)."""
    sql = _UPSERT.format(since=f" AND e.id IN ({','.join('?' * len(ids))})")
    db.execute(sql.replace("+ excluded.", "- excluded.") if remove else sql, ids)


def prune(db: sqlite3.Connection, cutoff_ns: int) -> None:
    """Inside the retention's transaction: drop the days the entries' pruning dropped (before the cutoff's day)."""
    db.execute("DELETE FROM session_usage WHERE day < ?", (cutoff_ns // DAY_NS,))


def usable(db: sqlite3.Connection, thresholds: Iterable[int]) -> bool:
    """Is the table there and current, and do the price table's tiers fit its bands?"""
    try:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (META,)).fetchone()
    except sqlite3.Error:
        return False
    return row is not None and row[0] == KEY and set(thresholds) <= set(EDGES)
