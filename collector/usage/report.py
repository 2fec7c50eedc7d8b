"""A report: the groups of ``query.aggregate`` as a stable JSON document and as a terminal table.

The JSON shape is documented in docs/reports.md; field names only ever get added.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime, tzinfo
from decimal import Decimal
from typing import Any

from collector.usage.prices import PriceTable
from collector.usage.query import Filters, Group, Totals, aggregate, session_info

BLOCK_HOURS = 5
JSON_VERSION = 1


@dataclass(frozen=True, slots=True)
class ReportRequest:
    kind: str
    filters: Filters
    tz: tzinfo
    tz_name: str
    since: str | None = None
    until: str | None = None


def build_report(db: sqlite3.Connection, request: ReportRequest, prices: PriceTable | None = None,
                 now: float | None = None) -> dict[str, Any]:
    prices = prices or PriceTable()
    groups = aggregate(db, request.kind, request.filters, request.tz, prices)
    if request.kind == "blocks":
        groups = _blocks(groups)
    sessions = session_info(db) if request.kind == "session" else {}
    total = Totals()
    rows = []
    for group in groups:
        total.add(group.totals)
        rows.append(_row(group, request, sessions, time.time() if now is None else now))
    return {
        "report": request.kind, "version": JSON_VERSION, "timezone": request.tz_name,
        "since": request.since, "until": request.until, "agents": list(request.filters.agents),
        "project": request.filters.project, "repo": request.filters.repo, "branch": request.filters.branch,
        "price_table": prices.version, "generated_unix": time.time(),
        "rows": rows, "total": totals_json(total, request.tz),
    }


def totals_json(t: Totals, tz: tzinfo) -> dict[str, Any]:
    differs = (t.agent_cost is not None and t.agent_cost_calls > 0
               and abs(Decimal(str(t.agent_cost)) - t.agent_priced_cost) > max(Decimal("0.01") * abs(
                   Decimal(str(t.agent_cost))), Decimal("0.000001")))
    return {
        "calls": t.calls,
        "input_tokens": t.input,
        "uncached_input_tokens": max(t.input - t.cache_read - t.cache_write, 0),
        "cache_read_tokens": t.cache_read,
        "cache_write_tokens": t.cache_write,
        "output_tokens": t.output,
        "reasoning_tokens": t.reasoning,
        "total_tokens": t.input + t.output,
        "tool_calls": t.tool_calls,
        "tool_failures": t.tool_failures,
        "errors": t.errors,
        "cost_usd": float(round(t.cost, 10)) if t.priced else None,
        "unpriced_calls": t.unpriced_calls,
        "price_source": ", ".join(sorted(t.price_sources)) or None,
        "agent_cost_usd": None if t.agent_cost is None else round(t.agent_cost, 10),
        "cost_differs": bool(differs),
        "first_time": _iso(t.first_ns, tz),
        "last_time": _iso(t.last_ns, tz),
    }


def _iso(time_ns: int | None, tz: tzinfo) -> str | None:
    if time_ns is None:
        return None
    return datetime.fromtimestamp(time_ns / 1e9, tz).isoformat(timespec="seconds")


def _row(group: Group, request: ReportRequest, sessions: dict[str, dict[str, Any]], now: float) -> dict[str, Any]:
    row: dict[str, Any] = {"key": group.key, **totals_json(group.totals, request.tz)}
    if request.kind == "session":
        info = sessions.get(group.key, {})
        agent, _, session = group.key.partition(" ")
        row.update(agent=agent, session=session, project=info.get("project"), status=info.get("status"))
    if request.kind == "blocks":
        row.update(group.info)
        row["active"] = group.info["end_unix"] > now
        row["start"] = datetime.fromtimestamp(group.info["start_unix"], request.tz).isoformat(timespec="minutes")
        row["end"] = datetime.fromtimestamp(group.info["end_unix"], request.tz).isoformat(timespec="minutes")
    row["models"] = [{"model": m, **totals_json(t, request.tz)} for m, t in sorted(group.models.items())]
    return row


def _blocks(hours: list[Group]) -> list[Group]:
    """5-hour blocks: a block starts at the hour of the first activity after the previous block ended."""
    blocks: list[Group] = []
    current: Group | None = None
    end_hour = 0
    for hour_group in hours:  # keys are zero-padded UTC hours since the epoch, in order
        hour = int(hour_group.key)
        if current is None or hour >= end_hour:
            end_hour = hour + BLOCK_HOURS
            current = Group(time.strftime("%Y-%m-%dT%H:00Z", time.gmtime(hour * 3600)),
                            info={"start_unix": hour * 3600, "end_unix": end_hour * 3600})
            blocks.append(current)
        current.totals.add(hour_group.totals)
        for model, totals in hour_group.models.items():
            current.models.setdefault(model, Totals()).add(totals)
    return blocks
