"""Aggregations over the usage store: token, call, tool and cost totals grouped by a key.

One SQL pass groups the store's rows by the report's key (a local day, week or month through a SQLite
function that knows the time zone, a session, a model, an agent, a project, a git repository, branch or
working tree, or a UTC hour for blocks) and by what
pricing needs (model, provider, UTC day, input band); ``Totals`` then add the groups up in Python and
price each group with the rates of its model, day and band.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from decimal import Decimal
from functools import lru_cache
from typing import Any

import collector.usage.rollup as rollup
from collector.usage.prices import PriceTable
from collector.usage.rollup import SLOT_NS

COUNTED_SQL = rollup.COUNTED
KINDS = ("daily", "weekly", "monthly", "session", "model", "agent", "project", "repo", "branch", "worktree", "blocks")
GIT_KINDS = ("repo", "branch", "worktree")  # the store's columns of the same names


@dataclass(frozen=True, slots=True)
class Filters:
    since_ns: int | None = None
    until_ns: int | None = None  # exclusive
    agents: tuple[str, ...] = ()
    project: str | None = None
    repo: str | None = None  # the normalised URL, or its last part (the name)
    branch: str | None = None
    raw: bool = False  # read the entries, not the rollup (tests compare the two)


@dataclass(slots=True)
class Totals:
    calls: int = 0
    input: int = 0  # including cache reads and writes
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0
    tool_calls: int = 0
    tool_failures: int = 0
    errors: int = 0
    cost: Decimal = Decimal(0)
    unpriced_calls: int = 0
    agent_cost: float | None = None
    agent_cost_calls: int = 0
    agent_priced_cost: Decimal = Decimal(0)  # our cost of the calls that carry the agent's own figure
    first_ns: int | None = None
    last_ns: int | None = None
    price_sources: set[str] = field(default_factory=set)  # the tables that priced these calls

    def add(self, other: Totals) -> None:
        self.calls += other.calls
        self.input += other.input
        self.cache_read += other.cache_read
        self.cache_write += other.cache_write
        self.output += other.output
        self.reasoning += other.reasoning
        self.tool_calls += other.tool_calls
        self.tool_failures += other.tool_failures
        self.errors += other.errors
        self.cost += other.cost
        self.unpriced_calls += other.unpriced_calls
        self.price_sources |= other.price_sources
        self.agent_cost_calls += other.agent_cost_calls
        self.agent_priced_cost += other.agent_priced_cost
        if other.agent_cost is not None:
            self.agent_cost = (self.agent_cost or 0.0) + other.agent_cost
        self.first_ns = _min(self.first_ns, other.first_ns)
        self.last_ns = _max(self.last_ns, other.last_ns)

    @property
    def priced(self) -> bool:
        return self.calls > self.unpriced_calls or self.calls == 0


@dataclass(slots=True)
class Group:
    key: str
    totals: Totals = field(default_factory=Totals)
    models: dict[str, Totals] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def period_function(kind: str, tz: tzinfo) -> Callable[[int], str]:
    """time_ns -> the local period's label (day, Monday of the week, month), cached per quarter hour."""

    @lru_cache(maxsize=65536)
    def label(slot: int) -> str:
        local = datetime.fromtimestamp(slot * SLOT_NS / 1e9, tz)
        if kind == "weekly":
            return (local.date() - timedelta(days=local.weekday())).isoformat()
        if kind == "monthly":
            return local.strftime("%Y-%m")
        return local.date().isoformat()

    return lambda time_ns: label(time_ns // SLOT_NS)


def key_sql(kind: str, rolled: bool = False, git: bool = True) -> str:
    """The SQL of a report's key; ``git`` False: the store has no git columns (one written before them, read
    without opening it for writing), so every row is of no repository."""
    t = "r" if rolled else "e"
    if kind in GIT_KINDS:
        return f"COALESCE({t}.{kind}, '')" if git else "''"
    model = "COALESCE(NULLIF(r.model, ''), s.model, '')" if rolled else "COALESCE(e.model, s.model, '')"
    return {
        "daily": f"period({t}.{'slot * ' + str(SLOT_NS) if rolled else 'time_ns'})",
        "weekly": f"period({t}.{'slot * ' + str(SLOT_NS) if rolled else 'time_ns'})",
        "monthly": f"period({t}.{'slot * ' + str(SLOT_NS) if rolled else 'time_ns'})",
        "session": f"{t}.agent || ' ' || COALESCE({t}.session, '')", "model": model,
        "agent": f"{t}.agent", "project": "COALESCE(s.project, '')",
        "blocks": "printf('%012d', r.slot / 4)" if rolled else "printf('%012d', e.time_ns / 3600000000000)",
    }[kind]


def _where(filters: Filters, rolled: bool = False, git: bool = True) -> tuple[str, list[Any]]:
    t = "r" if rolled else "e"
    # successful tool results count for nothing: the rollup leaves them out, so does the pass over entries
    clauses = ["1" if rolled else COUNTED_SQL]
    params: list[Any] = []
    if filters.since_ns is not None:
        clauses.append("r.slot >= ?" if rolled else "e.time_ns >= ?")
        params.append(filters.since_ns // SLOT_NS if rolled else filters.since_ns)
    if filters.until_ns is not None:
        clauses.append("r.slot < ?" if rolled else "e.time_ns < ?")
        params.append(-(-filters.until_ns // SLOT_NS) if rolled else filters.until_ns)
    if filters.agents:
        clauses.append(f"{t}.agent IN ({','.join('?' * len(filters.agents))})")
        params.extend(filters.agents)
    if filters.project:
        clauses.append("(s.project = ? OR s.project LIKE ? ESCAPE '\\')")
        params.extend([filters.project, f"%/{escape_like(filters.project)}"])
    if filters.repo:
        clauses.append(f"({t}.repo = ? OR {t}.repo LIKE ? ESCAPE '\\')" if git else "0")
        params.extend([filters.repo, f"%/{escape_like(filters.repo)}"] if git else [])
    if filters.branch:
        clauses.append(f"{t}.branch = ?" if git else "0")
        params.extend([filters.branch] if git else [])
    return " AND ".join(clauses), params


def escape_like(text: str) -> str:
    """``text`` for a LIKE pattern with ESCAPE '\\': its wildcards match only themselves."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def has_git_columns(db: sqlite3.Connection) -> bool:
    """Does the store's ``events`` have the git columns (schema 5)? A report reads a store read-only, so one the
    daemon has not opened since the upgrade still has the older table."""
    return "repo" in {row[1] for row in db.execute("PRAGMA table_info(events)")}


def git_choices(db: sqlite3.Connection, since_ns: int) -> list[tuple[str, str]]:
    """The (repository, branch) pairs with counted usage since ``since_ns`` (``''`` where there is none), in
    order: from the rollup (a range of its key) when it is current, else from the entries; none from a store
    without the git columns."""
    if rollup.usable(db, ()):
        sql, params = "SELECT DISTINCT repo, branch FROM slots WHERE slot >= ?", [since_ns // SLOT_NS]
    elif has_git_columns(db):
        sql = (f"SELECT DISTINCT COALESCE(e.repo, ''), COALESCE(e.branch, '') FROM events e "
               f"WHERE {COUNTED_SQL} AND e.time_ns >= ?")
        params = [since_ns]
    else:
        return []
    return sorted((str(r[0]), str(r[1])) for r in db.execute(sql, params))


def models_present(db: sqlite3.Connection) -> list[tuple[str | None, str | None]]:
    """Every model the store has seen (with its provider), from the small ``models`` table."""
    sql = ("SELECT model, NULLIF(provider, '') FROM models "
           "UNION SELECT DISTINCT model, NULL FROM sessions WHERE model IS NOT NULL")
    try:
        return [(r[0], r[1]) for r in db.execute(sql)]
    except sqlite3.OperationalError:  # a store written before the models table existed
        return [(r[0], r[1]) for r in db.execute("SELECT DISTINCT model, provider FROM events")]


def grouped(db: sqlite3.Connection, kinds: Sequence[str], filters: Filters, tz: tzinfo,
            prices: PriceTable) -> list[tuple[tuple[str, ...], str, Totals]]:
    """One pass over the store: priced totals per (key of each kind, model). At most one of daily,
    weekly and monthly among ``kinds`` (they share the time-zone function). Reads the rollup when it
    can (``collector.usage.rollup``), the entries otherwise; both give the same sums."""
    for kind in kinds:
        if kind not in KINDS:
            raise ValueError(f"unknown report {kind!r} (one of {', '.join(KINDS)})")
    periods = [k for k in kinds if k in ("daily", "weekly", "monthly")]
    assert len(periods) <= 1, "one period kind per pass"
    db.create_function("period", 1, period_function(periods[0] if periods else "daily", tz), deterministic=True)
    prices.prepare(models_present(db))
    rolled = rollup.usable(db, prices.thresholds) and not filters.raw
    sql, params = _rollup_sql(kinds, filters, prices) if rolled else _entries_sql(
        kinds, filters, prices, has_git_columns(db))
    width = len(kinds)
    edge = rollup.representative if rolled else prices.representative
    return [(tuple(row[:width]), row[width] or "unknown", _totals(row[width:], prices, edge))
            for row in db.execute(sql, params)]


def _entries_sql(kinds: Sequence[str], filters: Filters, prices: PriceTable,
                 git: bool = True) -> tuple[str, list[Any]]:
    where, params = _where(filters, git=git)
    keys = ", ".join(f"{key_sql(kind, git=git)} AS k{i}" for i, kind in enumerate(kinds))
    names = ", ".join(f"k{i}" for i in range(len(kinds)))
    return f"""
        SELECT {keys}, COALESCE(e.model, s.model) AS mdl, e.provider, e.day,
               {prices.band_sql('e.input')} AS band,
               SUM(e.name = 'llm.response'), SUM(e.input), SUM(e.cache_read), SUM(e.cache_write),
               SUM(e.output), SUM(e.reasoning), SUM(e.name = 'tool.call'),
               SUM(e.name = 'tool.result'), SUM(e.name = 'error'),
               SUM(e.agent_cost_usd), COUNT(e.agent_cost_usd), MIN(e.time_ns), MAX(e.time_ns),
               SUM(CASE WHEN e.agent_cost_usd IS NOT NULL THEN e.input END),
               SUM(CASE WHEN e.agent_cost_usd IS NOT NULL THEN e.cache_read END),
               SUM(CASE WHEN e.agent_cost_usd IS NOT NULL THEN e.cache_write END),
               SUM(CASE WHEN e.agent_cost_usd IS NOT NULL THEN e.output END)
        FROM events e NOT INDEXED LEFT JOIN sessions s ON s.agent = e.agent AND s.session = e.session
        WHERE {where}
        GROUP BY {names}, mdl, e.provider, e.day, band
    """, params


def _rollup_sql(kinds: Sequence[str], filters: Filters, prices: PriceTable) -> tuple[str, list[Any]]:
    where, params = _where(filters, rolled=True)
    keys = ", ".join(f"{key_sql(kind, rolled=True)} AS k{i}" for i, kind in enumerate(kinds))
    names = ", ".join(f"k{i}" for i in range(len(kinds)))
    return f"""
        SELECT {keys}, COALESCE(NULLIF(r.model, ''), s.model) AS mdl, NULLIF(r.provider, '') AS prov,
               r.slot / {86400 * 10**9 // SLOT_NS} AS uday, r.band,
               SUM(r.calls), SUM(r.input), SUM(r.cache_read), SUM(r.cache_write), SUM(r.output),
               SUM(r.reasoning), SUM(r.tool_calls), SUM(r.tool_failures), SUM(r.errors), SUM(r.agent_cost),
               SUM(r.agent_cost_calls), MIN(r.first_ns), MAX(r.last_ns), SUM(r.a_input), SUM(r.a_cache_read),
               SUM(r.a_cache_write), SUM(r.a_output)
        FROM slots r LEFT JOIN sessions s ON s.agent = r.agent AND s.session = r.session
        WHERE {where}
        GROUP BY {names}, mdl, prov, uday, r.band
    """, params


def fold(rows: Iterable[tuple[tuple[str, ...], str, Totals]], index: int = 0) -> list[Group]:
    """Groups by the key at ``index``, in key order, each with its per-model breakdown."""
    groups: dict[str, Group] = {}
    for keys, model, totals in rows:
        group = groups.get(keys[index])
        if group is None:
            group = groups[keys[index]] = Group(keys[index])
        group.totals.add(totals)
        group.models.setdefault(model, Totals()).add(totals)
    return [groups[k] for k in sorted(groups)]


def aggregate(db: sqlite3.Connection, kind: str, filters: Filters, tz: tzinfo, prices: PriceTable) -> list[Group]:
    """The report's groups, in key order, each with its per-model breakdown."""
    return fold(grouped(db, [kind], filters, tz, prices))


def _totals(row: Iterable[Any], prices: PriceTable, representative: Callable[[int], int]) -> Totals:
    (model, provider, day, band, calls, inp, cr, cw, out, reasoning, tools, fails, errors,
     agent_cost, agent_cost_calls, first, last, a_in, a_cr, a_cw, a_out) = tuple(row)
    totals = Totals(calls=calls or 0, input=inp or 0, cache_read=cr or 0, cache_write=cw or 0, output=out or 0,
                    reasoning=reasoning or 0, tool_calls=tools or 0, tool_failures=fails or 0, errors=errors or 0,
                    agent_cost=agent_cost, agent_cost_calls=agent_cost_calls or 0, first_ns=first, last_ns=last)
    if totals.calls:
        if isinstance(day, int):  # the rollup's day number
            day = time.strftime("%Y-%m-%d", time.gmtime(day * 86400))
        rates = prices.rates(model, provider, day, representative(int(band)))
        if rates is None:
            totals.unpriced_calls = totals.calls
        else:
            totals.cost = rates.cost(totals.input, totals.cache_read, totals.cache_write, totals.output)
            totals.price_sources = {rates.source}
            if agent_cost_calls:
                totals.agent_priced_cost = rates.cost(a_in or 0, a_cr or 0, a_cw or 0, a_out or 0)
    return totals


def session_info(db: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """agent + ' ' + session -> project, first and last time, last status."""
    rows = db.execute("SELECT agent, session, project, first_ns, last_ns, status FROM sessions")
    return {f"{r[0]} {r[1]}": {"agent": r[0], "session": r[1], "project": r[2], "first_ns": r[3],
                                "last_ns": r[4], "status": r[5]} for r in rows}
