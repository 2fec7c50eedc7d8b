"""The numbers ``/v1/usage`` answers: usage and cost per day, per agent, model, project, git repository and
branch (all of them narrowed to one repository and/or branch when asked), the repositories and branches
there are to choose from, the live sessions, recent tool failures and errors, the collector's health. Read
from the usage store (a fresh read-only connection per request) and the daemon's snapshot; no content unless
capture kept it."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping
from datetime import date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from collector.usage.prices import CACHE_NAME, PriceTable
from collector.usage.query import Filters, Totals, git_choices, grouped
from collector.usage.report import totals_json
from collector.usage.store import connect
from collector.util.short_ids import shortest_unique

FAILURES = 25
KINDS = ("daily", "agent", "model", "project", "repo", "branch")


def usage_view(store: Path, snapshot: dict[str, Any], tz: tzinfo, tz_name: str, days: int,
               capture: bool, now: float | None = None,
               own_prices: Mapping[str, Mapping[str, float]] | None = None, repo: str | None = None,
               branch: str | None = None, prices: PriceTable | None = None) -> dict[str, Any]:
    """``prices``: a table the caller keeps between requests (else a new one). ``repo`` (a normalised URL or its
    last part) and ``branch`` narrow the usage tables, the days and the
    total; the live sessions, failures and health are not narrowed, the choices (``git``) never."""
    now = time.time() if now is None else now
    today = datetime.fromtimestamp(now, tz).date()
    first = today - timedelta(days=days - 1)
    since_ns = int(datetime(first.year, first.month, first.day, tzinfo=tz).timestamp()) * 10**9
    view: dict[str, Any] = {
        "generated_unix": now, "timezone": tz_name, "days": days, "since": first.isoformat(),
        "until": today.isoformat(), "content_capture": capture, "store": str(store),
        "sessions": _sessions(snapshot), "health": _health(snapshot), "repo": repo, "branch": branch,
        "budget": _budget(snapshot),
    }
    if not store.is_file():
        return {**view, "price_table": PriceTable().version, "daily": _days(first, today, []),
                "by_agent": [], "by_model": [], "by_project": [], "by_repo": [], "by_branch": [], "git": [],
                "total": None, "recent_failures": []}
    db = connect(store, readonly=True)
    try:
        prices = prices or PriceTable(store.with_name(CACHE_NAME), own_prices)
        rows = grouped(db, KINDS, Filters(since_ns=since_ns, repo=repo, branch=branch), tz, prices)  # one pass
        choices = [{"repo": r, "branch": b} for r, b in git_choices(db, since_ns)]
        failures = _label_failures(_failures(db, since_ns, capture))
    finally:
        db.close()
    prices.save()
    tables = {kind: [{"key": key, **totals_json(t, tz)} for key, t in _sums(rows, i)] for i, kind in enumerate(KINDS)}
    total = Totals()
    for _, _, totals in rows:
        total.add(totals)
    return {**view, "price_table": prices.version, "daily": _days(first, today, tables["daily"]),
            "by_agent": tables["agent"], "by_model": tables["model"], "by_project": tables["project"],
            "by_repo": tables["repo"], "by_branch": tables["branch"], "git": choices,
            "total": totals_json(total, tz), "recent_failures": failures}


def _sums(rows: list[tuple[tuple[str, ...], str, Totals]], index: int) -> list[tuple[str, Totals]]:
    """The totals per key at ``index``, in key order: ``query.fold`` without its per-model breakdown, which the
    page does not show (half the additions: 300 ms of a 90-day answer on 300,000 entries)."""
    sums: dict[str, Totals] = {}
    for keys, _, totals in rows:
        found = sums.get(keys[index])
        if found is None:
            found = sums[keys[index]] = Totals()
        found.add(totals)
    return sorted(sums.items())


def _days(first: date, last: date, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every day of the window, zeros where nothing happened."""
    by_day = {r["key"]: r for r in rows}
    out = []
    day = first
    while day <= last:
        row = by_day.get(day.isoformat())
        out.append({"key": day.isoformat(), **({k: v for k, v in row.items() if k not in ("key", "models")}
                                                if row else _zero())})
        day += timedelta(days=1)
    return out


def _zero() -> dict[str, Any]:
    return {"calls": 0, "input_tokens": 0, "uncached_input_tokens": 0, "cache_read_tokens": 0,
            "cache_write_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0, "total_tokens": 0,
            "tool_calls": 0, "tool_failures": 0, "errors": 0, "cost_usd": 0.0, "unpriced_calls": 0}


def _failures(db: sqlite3.Connection, since_ns: int, capture: bool) -> list[dict[str, Any]]:
    sql = """SELECT time_ns, name, agent, session, tool, error_type, http_status, detail FROM events
             WHERE name = ? AND time_ns >= ? AND (? = 'error' OR tool_status = 'error')
             ORDER BY time_ns DESC LIMIT ?"""
    rows = [r for name in ("tool.result", "error") for r in db.execute(sql, (name, since_ns, name, FAILURES))]
    rows.sort(key=lambda r: r[0], reverse=True)
    return [{"time_unix_nano": r[0], "kind": "tool" if r[1] == "tool.result" else "error", "agent": r[2],
             "session": r[3], "tool": r[4], "error_type": r[5], "http_status": r[6],
             **({"detail": r[7]} if capture and r[7] else {})} for r in rows[:FAILURES]]


def _sessions(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    """The live sessions only (active within their agent's idle timeout), each with a label unique among them."""
    keep = ("agent", "session_id", "status", "status_since_unix_nano", "last_event_unix_nano", "workspace",
            "model", "input_tokens_today", "output_tokens_today", "tool_calls_today", "errors_today")
    live = [s for s in snapshot.get("sessions") or [] if isinstance(s, dict) and s.get("live")]
    labels = shortest_unique(str(s.get("session_id") or "") for s in live)
    return [{k: s.get(k) for k in keep} | {"waiting": len(s.get("waiting_for") or []),
                                           "label": labels[str(s.get("session_id") or "")]} for s in live]


def _label_failures(failures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    labels = shortest_unique(str(f.get("session") or "") for f in failures)
    return [f | {"session_label": labels[str(f.get("session") or "")]} for f in failures]


def _budget(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The daemon's budgets ([budget] in its config): how many, and those at warn or over (name, level, part)."""
    given = snapshot.get("budget")
    budget: dict[str, Any] = given if isinstance(given, dict) else {}
    crossed = [{"name": str(c.get("name")), "level": c.get("level"), "fraction": c.get("fraction"),
                "hard": bool(c.get("hard"))}
               for c in budget.get("crossed") or [] if isinstance(c, dict) and c.get("level") in ("warn", "over")]
    limits = budget.get("limits")
    return {"limits": limits if isinstance(limits, int) else 0, "crossed": crossed}


def _health(snapshot: dict[str, Any]) -> dict[str, Any]:
    sources = snapshot.get("sources") or {}
    failing = {name: stats for name, stats in sources.items()
               if isinstance(stats, dict) and (stats.get("errors") or stats.get("last_error"))}
    exporters = {name: {k: v for k, v in stats.items() if k in ("written", "queued", "dropped", "sent", "errors",
                                                                 "last_error", "duplicates_skipped")}
                 for name, stats in (snapshot.get("exporters") or {}).items() if isinstance(stats, dict)}
    pipeline = snapshot.get("pipeline") or {}
    return {"version": snapshot.get("version"), "pid": snapshot.get("pid"), "started": snapshot.get("started"),
            "sources": len(sources), "failing_sources": failing, "exporters": exporters,
            "records": pipeline.get("records"), "entries": pipeline.get("entries"),
            "parse_errors": pipeline.get("parse_errors"), "duplicates": pipeline.get("duplicates"),
            "session_status": snapshot.get("session_status") or {}}
