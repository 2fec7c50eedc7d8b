"""The store's per-entry rows as the detail reports read them (``report tools``, ``report session ID``,
``report models --compare``, ``report findings``): one pass over ``events`` of a time range and agents, in
time order, as small records. These reports need the order of a session's entries (what came after a tool
result), which the rollup does not keep."""

from __future__ import annotations

import math
import sqlite3
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from collector.usage.prices import PriceTable
from collector.usage.query import Filters, escape_like, has_git_columns, models_present

BYTES_PER_TOKEN = 4  # the estimate of a tool result's tokens: its size in bytes / 4, rounded up (docs/reports.md)
NAMES = ("llm.response", "tool.call", "tool.result", "error", "user.prompt", "subagent.start")


@dataclass(frozen=True, slots=True)
class Row:
    name: str
    time_ns: int
    day: str
    agent: str
    session: str
    turn: str
    model: str
    provider: str
    input: int
    output: int
    cache_read: int
    cache_write: int
    duration_ms: float | None
    tool: str
    tool_status: str
    agent_id: str  # the subagent the entry belongs to; '' for the main agent
    call_id: str
    parent_call: str
    args_digest: str
    result_bytes: int | None

    @property
    def stream(self) -> tuple[str, str, str]:
        """Whose context the entry is in: the agent, the session, the subagent (or '')."""
        return self.agent, self.session, self.agent_id

    @property
    def result_tokens(self) -> int:
        return math.ceil(self.result_bytes / BYTES_PER_TOKEN) if self.result_bytes else 0


def _has_detail_columns(db: sqlite3.Connection) -> bool:
    return "result_bytes" in {row[1] for row in db.execute("PRAGMA table_info(events)")}


def load(db: sqlite3.Connection, filters: Filters, session: str | None = None) -> list[Row]:
    """The entries the detail reports read, oldest first, by the filters of every report (time, agents, project,
    repository, branch); a store the daemon has not opened since schema 6 has no detail columns: they read as
    empty."""
    detail = ("COALESCE(e.agent_id, ''), COALESCE(e.call_id, ''), COALESCE(e.parent_call, ''), "
              "COALESCE(e.args_digest, ''), e.result_bytes") if _has_detail_columns(db) else "'', '', '', '', NULL"
    clauses, params = [f"e.name IN ({','.join('?' * len(NAMES))})"], list[object](NAMES)
    if filters.since_ns is not None:
        clauses.append("e.time_ns >= ?")
        params.append(filters.since_ns)
    if filters.until_ns is not None:
        clauses.append("e.time_ns < ?")
        params.append(filters.until_ns)
    if filters.agents:
        clauses.append(f"e.agent IN ({','.join('?' * len(filters.agents))})")
        params.extend(filters.agents)
    git = has_git_columns(db)
    if filters.project:
        clauses.append("(s.project = ? OR s.project LIKE ? ESCAPE '\\')")
        params.extend([filters.project, f"%/{escape_like(filters.project)}"])
    if filters.repo:
        clauses.append("(e.repo = ? OR e.repo LIKE ? ESCAPE '\\')" if git else "0")
        params.extend([filters.repo, f"%/{escape_like(filters.repo)}"] if git else [])
    if filters.branch:
        clauses.append("e.branch = ?" if git else "0")
        params.extend([filters.branch] if git else [])
    if session is not None:
        clauses.append("e.session = ?")
        params.append(session)
    sql = (f"SELECT e.name, e.time_ns, e.day, e.agent, COALESCE(e.session, ''), COALESCE(e.turn, ''), "
           f"COALESCE(e.model, s.model, ''), COALESCE(e.provider, ''), e.input, e.output, e.cache_read, "
           f"e.cache_write, e.duration_ms, COALESCE(e.tool, ''), COALESCE(e.tool_status, ''), {detail} "
           f"FROM events e LEFT JOIN sessions s ON s.agent = e.agent AND s.session = e.session "
           f"WHERE {' AND '.join(clauses)} ORDER BY e.time_ns, e.id")
    return [Row(*r) for r in db.execute(sql, params)]


def sessions_like(db: sqlite3.Connection, text: str) -> list[tuple[str, str]]:
    """The (agent, session) pairs whose id is ``text`` or starts with it."""
    rows = db.execute("SELECT agent, session FROM sessions WHERE session = ? OR substr(session, 1, ?) = ? "
                      "ORDER BY session = ? DESC, agent, session", (text, len(text), text, text))
    found = [(str(a), str(s)) for a, s in rows]
    exact = [pair for pair in found if pair[1] == text]
    return exact or found


class LaterCalls:
    """How many model calls of the same context (agent, session, subagent) come after a moment: a tool result
    is in the input of each of them (until the session ends; a compaction is not modelled)."""

    def __init__(self, rows: Iterable[Row]) -> None:
        self._times: dict[tuple[str, str, str], list[int]] = {}
        for row in rows:
            if row.name == "llm.response":
                self._times.setdefault(row.stream, []).append(row.time_ns)
        for times in self._times.values():
            times.sort()

    def after(self, row: Row) -> int:
        times = self._times.get(row.stream, [])
        return len(times) - bisect_right(times, row.time_ns)


class Pricer:
    """The cost of one model call by the tables ``report`` uses (each call at its own day and tier)."""

    def __init__(self, db: sqlite3.Connection, prices: PriceTable) -> None:
        self.prices = prices
        prices.prepare(models_present(db))

    def cost(self, row: Row) -> Decimal | None:
        rates = self.prices.rates(row.model or None, row.provider or None, row.day, row.input)
        return None if rates is None else rates.cost(row.input, row.cache_read, row.cache_write, row.output)


@dataclass(slots=True)
class CallSums:
    """The model calls' tokens and cost, as every detail report sums them (cache reads and writes apart;
    a call of a model without a price counted, its cost left out)."""

    calls: int = 0
    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    cost: Decimal = Decimal(0)
    unpriced_calls: int = 0

    def add_call(self, row: Row, pricer: Pricer) -> None:
        self.calls += 1
        self.input += row.input
        self.cache_read += row.cache_read
        self.cache_write += row.cache_write
        self.output += row.output
        cost = pricer.cost(row)
        if cost is None:
            self.unpriced_calls += 1
        else:
            self.cost += cost

    def tokens_json(self) -> dict[str, Any]:
        return {"calls": self.calls, "input_tokens": self.input, "cache_read_tokens": self.cache_read,
                "cache_write_tokens": self.cache_write, "output_tokens": self.output,
                "total_tokens": self.input + self.output,
                "cost_usd": money(self.cost) if self.calls > self.unpriced_calls or not self.calls else None,
                "unpriced_calls": self.unpriced_calls}


def money(value: Decimal | None) -> float | None:
    return None if value is None else float(round(value, 10))


def share(part: float, whole: float) -> float | None:
    return None if not whole else round(part / whole, 6)


def ordered(rows: Sequence[Row], name: str) -> list[Row]:
    return [r for r in rows if r.name == name]
