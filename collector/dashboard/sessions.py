"""The dashboard's views of work (``/v1/usage/sessions``, ``/v1/usage/timeline``, ``/v1/usage/activity``): the
query string checked once here (dates, filters, order, page), the store read through a fresh read-only
connection, the answer one page of rows, never more.

A session's title is the start of its first prompt while content capture is on (``collector.usage.titles``
keeps it only when capture put the text in the entry), else a neutral label: the agent and the shortest unique
start of its id."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from collector.usage.activity import activity
from collector.usage.prices import CACHE_NAME, PriceTable
from collector.usage.sessions import MAX_LIMIT, SORTS, SessionQuery, session_rows, top
from collector.usage.store import connect
from collector.usage.timeline import timeline
from collector.usage.titles import titles
from collector.util.short_ids import shortest_unique

MAX_TEXT = 2048
PRICES_TTL_S = 300.0
TOP = 5


class BadQuery(ValueError):
    """A query parameter out of its range (the route answers 400 with the message)."""


def _text(query: Mapping[str, list[str]], key: str) -> str | None:
    value = (query.get(key) or [""])[0]
    if len(value) > MAX_TEXT or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise BadQuery(f"{key} must be at most {MAX_TEXT} characters, without control characters")
    return value or None


def _number(query: Mapping[str, list[str]], key: str, default: int, low: int, high: int) -> int:
    raw = (query.get(key) or [str(default)])[0]
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise BadQuery(f"{key} must be {low}..{high}")
    return int(raw)


def _day_ns(text: str | None, key: str, tz: tzinfo) -> int | None:
    if text is None:
        return None
    try:
        day = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=tz)
    except ValueError:
        raise BadQuery(f"{key} must be a date YYYY-MM-DD") from None
    return int(day.timestamp()) * 10**9


def window(query: Mapping[str, list[str]], tz: tzinfo, now: float) -> tuple[int, int]:
    """[since, until) in ns: ``from``/``to`` (local dates, ``to`` included) or the last ``days`` days (default 30)."""
    start, end = _day_ns(_text(query, "from"), "from", tz), _day_ns(_text(query, "to"), "to", tz)
    if start is None:
        today = datetime.fromtimestamp(now, tz).date()
        first = today - timedelta(days=_number(query, "days", 30, 1, 3660) - 1)
        start = int(datetime(first.year, first.month, first.day, tzinfo=tz).timestamp()) * 10**9
    until = int((now + 86400) * 1e9) if end is None else end + 86400 * 10**9
    if until <= start:
        raise BadQuery("to must not be before from")
    return start, until


def parse_query(query: Mapping[str, list[str]], tz: tzinfo, now: float) -> SessionQuery:
    since, until = window(query, tz, now)
    sort = _text(query, "sort") or "start"
    if sort not in SORTS:
        raise BadQuery(f"sort must be one of {', '.join(SORTS)}")
    order = _text(query, "order") or "desc"
    if order not in ("asc", "desc"):
        raise BadQuery("order must be asc or desc")
    return SessionQuery(since_ns=since, until_ns=until, agent=_text(query, "agent"), project=_text(query, "project"),
                        repo=_text(query, "repo"), branch=_text(query, "branch"), model=_text(query, "model"),
                        text=_text(query, "q"),
                        sort=sort, descending=order == "desc", limit=_number(query, "limit", 50, 1, MAX_LIMIT),
                        offset=_number(query, "offset", 0, 0, 10**9))


def live_pairs(snapshot: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    return frozenset((str(s.get("agent")), str(s.get("session_id"))) for s in snapshot.get("sessions") or []
                     if isinstance(s, dict) and s.get("live"))


def _titled(rows: list[dict[str, Any]], db: sqlite3.Connection, capture: bool) -> list[dict[str, Any]]:
    """Each row's label (the shortest unique start of its id) and title: the start of its first prompt while
    content capture is on and the store kept one, else ``<agent> session <label>``."""
    labels = shortest_unique(r["session"] for r in rows)
    prompts = titles(db, [(r["agent"], r["session"]) for r in rows]) if capture else {}
    return [r | {"label": labels[r["session"]], "title": prompts.get((r["agent"], r["session"]))
                 or f"{r['agent']} session {labels[r['session']]}"} for r in rows]


class WorkViews:
    """The three views over one store; ``capture``: content capture is on (error details may be shown)."""

    def __init__(self, store: Path, capture: bool, own_prices: Mapping[str, Mapping[str, float]] | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store, self.capture, self.own_prices, self.clock = store, capture, own_prices, clock
        self._table: tuple[float, PriceTable] | None = None

    def prices(self) -> PriceTable:
        """One price table for ``PRICES_TTL_S`` (its rates worked out once, not per request; saved for the
        reports when new), then a fresh one (a price cache the reports refreshed is read again)."""
        now = self.clock()
        if self._table is not None and now - self._table[0] < PRICES_TTL_S:
            return self._table[1]
        if self._table is not None:
            self._table[1].save()
        table = PriceTable(self.store.with_name(CACHE_NAME), self.own_prices)
        self._table = (now, table)
        return table

    def sessions(self, query: Mapping[str, list[str]], tz: tzinfo, snapshot: Mapping[str, Any],
                 now: float | None = None) -> dict[str, Any]:
        asked = parse_query(query, tz, time.time() if now is None else now)
        if not self.store.is_file():
            return {"total": 0, "offset": asked.offset, "limit": asked.limit, "rows": [],
                    "content_capture": self.capture}
        db, prices = connect(self.store, readonly=True), self.prices()
        try:
            page = session_rows(db, asked, tz, prices, live_pairs(snapshot))
            page["rows"] = _titled(page["rows"], db, self.capture)
        finally:
            db.close()
        return {**page, "content_capture": self.capture, "price_table": prices.version}

    def timeline(self, query: Mapping[str, list[str]], tz: tzinfo) -> dict[str, Any] | None:
        agent, session = _text(query, "agent"), _text(query, "session")
        if not agent or not session:
            raise BadQuery("agent and session are required")
        if not self.store.is_file():
            return None
        db = connect(self.store, readonly=True)
        try:
            return timeline(db, agent, session, tz, self.prices(), self.capture)
        finally:
            db.close()

    def activity(self, query: Mapping[str, list[str]], tz: tzinfo, snapshot: Mapping[str, Any],
                 now: float | None = None) -> dict[str, Any]:
        """The heatmap and the top sessions by cost, tokens and duration in the window (same filters as the list)."""
        asked = parse_query(query, tz, time.time() if now is None else now)
        empty = {"by_hour": [[0] * 24 for _ in range(7)], "by_day": [], "top": {}}
        if not self.store.is_file():
            return empty
        db, prices = connect(self.store, readonly=True), self.prices()
        try:
            heat = activity(db, asked.since_ns or 0, asked.until_ns or 0, tz)
            best = {k: _titled(v, db, self.capture) for k, v in top(db, asked, tz, prices, TOP,
                                                                     live_pairs(snapshot)).items()}
        finally:
            db.close()
        return {**heat, "top": best}
