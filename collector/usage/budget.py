"""Spend guardrails: the ``[budget]`` section's limits and what each one has spent, read from the usage
store (``collector.usage.query``, the numbers `report` prints). The daemon evaluates them
(``collector.daemon.budget_watch``); docs/budgets.md describes the keys and the levels."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from typing import Any

from collector.usage.prices import PriceTable
from collector.usage.query import Filters, Totals, grouped
from collector.usage.report import BLOCK_HOURS

PERIODS = ("day", "week", "month", "block", "session")
SESSION_LOOKBACK_S = 7 * 86400  # a session budget counts what the session spent in the last 7 days
SESSION_ACTIVE_S = 3600  # ... of the sessions that had an entry in the last hour
BLOCK_LOOKBACK_H = 48  # the current 5-hour block is found among the blocks of the last 48 hours


@dataclass(frozen=True, slots=True)
class Limit:
    """One ``[[budget.limits]]`` table: ``amount`` in USD (``unit`` ``usd``) or tokens."""

    name: str
    period: str
    unit: str
    amount: float
    agent: str | None = None
    project: str | None = None
    repo: str | None = None
    hard: bool = False
    warn_at: float = 0.8


@dataclass(frozen=True, slots=True)
class BudgetSettings:
    limits: tuple[Limit, ...] = ()
    webhook: str = ""
    notify: bool = True


@dataclass(frozen=True, slots=True)
class LimitState:
    """What one limit (for a session budget: one session) has spent in its current window."""

    limit: Limit
    spent: float
    window_start_ns: int
    session: str | None = None  # "<agent> <session id>" for a session budget

    @property
    def fraction(self) -> float:
        return self.spent / self.limit.amount

    @property
    def level(self) -> str:
        """``over`` at the amount, ``warn`` at ``warn_at`` of it, else ``ok``."""
        if self.fraction >= 1:
            return "over"
        return "warn" if self.fraction >= self.limit.warn_at else "ok"

    def as_dict(self) -> dict[str, Any]:
        limit = self.limit
        return {"name": limit.name, "period": limit.period, "unit": limit.unit, "amount": limit.amount,
                "spent": round(self.spent, 6), "fraction": round(self.fraction, 4), "level": self.level,
                "hard": limit.hard, "agent": limit.agent, "project": limit.project, "repo": limit.repo,
                "session": self.session, "window_start_unix": self.window_start_ns / 1e9}


def settings(section: Mapping[str, Any]) -> BudgetSettings:
    """The checked ``[budget]`` section (the config schema checked types and ranges)."""
    warn_at = float(section.get("warn_at", 0.8))
    limits = []
    for spec in section.get("limits", []):
        unit = "usd" if "usd" in spec else "tokens"
        limits.append(Limit(name=spec["name"], period=spec.get("period", "day"), unit=unit,
                            amount=float(spec[unit]), agent=spec.get("agent") or None,
                            project=spec.get("project") or None, repo=spec.get("repo") or None,
                            hard=bool(spec.get("hard", False)), warn_at=float(spec.get("warn_at", warn_at))))
    return BudgetSettings(tuple(limits), str(section.get("webhook", "")), bool(section.get("notify", True)))


def window_start(period: str, now: float, tz: tzinfo) -> int:
    """The start (epoch ns) of the local day, ISO week (Monday) or month holding ``now``."""
    local = datetime.fromtimestamp(now, tz).replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "week":
        local -= timedelta(days=local.weekday())
    elif period == "month":
        local = local.replace(day=1)
    return int(local.timestamp()) * 10**9


def amount_of(totals: Totals, unit: str) -> float:
    """USD at list prices (our own pricing, as `report`), or tokens: input (cache included) + output."""
    return float(totals.cost) if unit == "usd" else float(totals.input + totals.output)


def current_block(db: sqlite3.Connection, now: float, tz: tzinfo, prices: PriceTable) -> tuple[int, int] | None:
    """(start, end) in epoch seconds of the 5-hour block holding ``now``, as `report blocks` cuts them (a
    block starts at the hour of the first activity after the previous one ended), or None."""
    since = (int(now) // 3600 - BLOCK_LOOKBACK_H) * 3600
    hours = sorted({keys[0] for keys, _, _ in grouped(db, ["blocks"], Filters(since_ns=since * 10**9), tz, prices)})
    end = start = 0
    for key in hours:
        hour = int(key)
        if hour >= end:
            start, end = hour, hour + BLOCK_HOURS
    start, end = start * 3600, end * 3600
    return (start, end) if start <= now < end else None


def evaluate(db: sqlite3.Connection, limits: tuple[Limit, ...], now: float, tz: tzinfo,
             prices: PriceTable) -> list[LimitState]:
    """Every limit's state now; a session budget gives one state per session active in the last hour."""
    states: list[LimitState] = []
    block = current_block(db, now, tz, prices) if any(lim.period == "block" for lim in limits) else None
    for limit in limits:
        if limit.period == "session":
            states += _sessions(db, limit, now, tz, prices)
            continue
        if limit.period == "block":
            if block is None:
                continue
            start = block[0] * 10**9
        else:
            start = window_start(limit.period, now, tz)
        rows = grouped(db, ["agent"], _filters(limit, start), tz, prices)
        states.append(LimitState(limit, sum(amount_of(t, limit.unit) for _, _, t in rows), start))
    return states


def _filters(limit: Limit, since_ns: int) -> Filters:
    return Filters(since_ns=since_ns, agents=(limit.agent,) if limit.agent else (), project=limit.project,
                   repo=limit.repo)


def _sessions(db: sqlite3.Connection, limit: Limit, now: float, tz: tzinfo, prices: PriceTable) -> list[LimitState]:
    since = int((now - SESSION_LOOKBACK_S) * 1e9)
    spent: dict[str, float] = {}
    first: dict[str, int] = {}
    recent: set[str] = set()
    active_ns = int((now - SESSION_ACTIVE_S) * 1e9)
    for keys, _, totals in grouped(db, ["session"], _filters(limit, since), tz, prices):
        key = keys[0]
        spent[key] = spent.get(key, 0.0) + amount_of(totals, limit.unit)
        first[key] = min(first.get(key, totals.first_ns or since), totals.first_ns or since)
        if (totals.last_ns or 0) >= active_ns:
            recent.add(key)
    return [LimitState(limit, spent[key], first[key], key) for key in sorted(recent)]


def spend_summary(db: sqlite3.Connection, now: float, tz: tzinfo, prices: PriceTable) -> dict[str, Any]:
    """Today's cost and tokens, the current block and the cost of each session active today: what the
    status line shows (``collector.daemon.budget_watch`` keeps it in ``<state dir>/spend.json``)."""
    today = window_start("day", now, tz)
    total = Totals()
    sessions: dict[str, float] = {}
    for keys, _, totals in grouped(db, ["session"], Filters(since_ns=today), tz, prices):
        total.add(totals)
        sessions[keys[0]] = sessions.get(keys[0], 0.0) + float(totals.cost)
    block = current_block(db, now, tz, prices)
    block_cost = None
    if block is not None:
        rows = grouped(db, ["agent"], Filters(since_ns=block[0] * 10**9), tz, prices)
        block_cost = round(sum(float(t.cost) for _, _, t in rows), 6)
    return {"day": time.strftime("%Y-%m-%d", time.localtime(now)),
            "today": {"usd": round(float(total.cost), 6), "tokens": total.input + total.output,
                      "unpriced_calls": total.unpriced_calls},
            "block": None if block is None else {"start_unix": block[0], "end_unix": block[1], "usd": block_cost},
            "sessions": {k: round(v, 6) for k, v in sessions.items()}}
