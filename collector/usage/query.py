"""Aggregations over the usage store: token, call, tool and cost totals grouped by a key.

One SQL pass groups the store's rows by the report's key (a local day, week or month through a SQLite
function that knows the time zone, a session, a model, an agent, or a UTC hour for blocks) and by what
pricing needs (model, provider, UTC day, input band); ``Totals`` then add the groups up in Python and
price each group with the rates of its model, day and band.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from decimal import Decimal
from functools import lru_cache
from typing import Any

from collector.usage.prices import PriceTable

SLOT_NS = 900 * 10**9  # time zones differ from UTC by whole quarter hours
COUNTED = ("llm.response", "tool.call", "tool.result", "error")
KINDS = ("daily", "weekly", "monthly", "session", "model", "agent", "blocks")


@dataclass(frozen=True, slots=True)
class Filters:
    since_ns: int | None = None
    until_ns: int | None = None  # exclusive
    agents: tuple[str, ...] = ()
    project: str | None = None


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

    def add(self, other: Totals) -> None:
        for name in ("calls", "input", "cache_read", "cache_write", "output", "reasoning", "tool_calls",
                     "tool_failures", "errors", "cost", "unpriced_calls", "agent_cost_calls", "agent_priced_cost"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
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


def key_sql(kind: str) -> str:
    return {
        "daily": "period(e.time_ns)", "weekly": "period(e.time_ns)", "monthly": "period(e.time_ns)",
        "session": "e.agent || ' ' || COALESCE(e.session, '')", "model": "COALESCE(e.model, s.model, '')",
        "agent": "e.agent", "blocks": "printf('%012d', e.time_ns / 3600000000000)",
    }[kind]


def _where(filters: Filters) -> tuple[str, list[Any]]:
    clauses = [f"e.name IN ({','.join('?' * len(COUNTED))})"]
    params: list[Any] = list(COUNTED)
    if filters.since_ns is not None:
        clauses.append("e.time_ns >= ?")
        params.append(filters.since_ns)
    if filters.until_ns is not None:
        clauses.append("e.time_ns < ?")
        params.append(filters.until_ns)
    if filters.agents:
        clauses.append(f"e.agent IN ({','.join('?' * len(filters.agents))})")
        params.extend(filters.agents)
    if filters.project:
        clauses.append("(s.project = ? OR s.project LIKE ? ESCAPE '\\')")
        escaped = filters.project.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        params.extend([filters.project, f"%/{escaped}"])
    return " AND ".join(clauses), params


def models_present(db: sqlite3.Connection, filters: Filters) -> list[tuple[str | None, str | None]]:
    where, params = _where(filters)
    sql = (f"SELECT DISTINCT COALESCE(e.model, s.model), e.provider FROM events e LEFT JOIN sessions s "
           f"ON s.agent = e.agent AND s.session = e.session WHERE {where}")
    return [(r[0], r[1]) for r in db.execute(sql, params)]


def aggregate(db: sqlite3.Connection, kind: str, filters: Filters, tz: tzinfo, prices: PriceTable) -> list[Group]:
    """The report's groups, in key order, each with its per-model breakdown."""
    if kind not in KINDS:
        raise ValueError(f"unknown report {kind!r} (one of {', '.join(KINDS)})")
    db.create_function("period", 1, period_function(kind, tz), deterministic=True)
    prices.prepare(models_present(db, filters))
    where, params = _where(filters)
    sql = f"""
        SELECT {key_sql(kind)} AS k, COALESCE(e.model, s.model) AS mdl, e.provider, e.day,
               {prices.band_sql('e.input')} AS band,
               SUM(e.name = 'llm.response'), SUM(e.input), SUM(e.cache_read), SUM(e.cache_write),
               SUM(e.output), SUM(e.reasoning), SUM(e.name = 'tool.call'),
               SUM(e.name = 'tool.result' AND e.tool_status = 'error'), SUM(e.name = 'error'),
               SUM(e.agent_cost_usd), COUNT(e.agent_cost_usd), MIN(e.time_ns), MAX(e.time_ns),
               SUM(CASE WHEN e.agent_cost_usd IS NOT NULL THEN e.input END),
               SUM(CASE WHEN e.agent_cost_usd IS NOT NULL THEN e.cache_read END),
               SUM(CASE WHEN e.agent_cost_usd IS NOT NULL THEN e.cache_write END),
               SUM(CASE WHEN e.agent_cost_usd IS NOT NULL THEN e.output END)
        FROM events e LEFT JOIN sessions s ON s.agent = e.agent AND s.session = e.session
        WHERE {where}
        GROUP BY k, mdl, e.provider, e.day, band
    """
    groups: dict[str, Group] = {}
    for row in db.execute(sql, params):
        key, model = row[0], row[1] or "unknown"
        totals = _totals(row, prices)
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(key)
        group.totals.add(totals)
        group.models.setdefault(model, Totals()).add(totals)
    return [groups[k] for k in sorted(groups)]


def _totals(row: Iterable[Any], prices: PriceTable) -> Totals:
    (_, model, provider, day, band, calls, inp, cr, cw, out, reasoning, tools, fails, errors,
     agent_cost, agent_cost_calls, first, last, a_in, a_cr, a_cw, a_out) = tuple(row)
    totals = Totals(calls=calls or 0, input=inp or 0, cache_read=cr or 0, cache_write=cw or 0, output=out or 0,
                    reasoning=reasoning or 0, tool_calls=tools or 0, tool_failures=fails or 0, errors=errors or 0,
                    agent_cost=agent_cost, agent_cost_calls=agent_cost_calls or 0, first_ns=first, last_ns=last)
    if totals.calls:
        rates = prices.rates(model, provider, day, int(band))
        if rates is None:
            totals.unpriced_calls = totals.calls
        else:
            totals.cost = rates.cost(totals.input, totals.cache_read, totals.cache_write, totals.output)
            if agent_cost_calls:
                totals.agent_priced_cost = rates.cost(a_in or 0, a_cr or 0, a_cw or 0, a_out or 0)
    return totals


def session_info(db: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """agent + ' ' + session -> project, first and last time, last status."""
    rows = db.execute("SELECT agent, session, project, first_ns, last_ns, status FROM sessions")
    return {f"{r[0]} {r[1]}": {"agent": r[0], "session": r[1], "project": r[2], "first_ns": r[3],
                                "last_ns": r[4], "status": r[5]} for r in rows}
