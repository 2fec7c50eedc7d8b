"""The dashboard's list of sessions: one row per session active in a window (agent, project, repository, branch,
models, start, duration, tokens, cost, tool failures, last status), filtered, sorted and cut into a page here,
so a browser never receives more than one page.

A session is in the window when its first-to-last time meets it (``sessions`` by its ``sessions_last`` index);
its numbers are the whole session's, so they are those of ``report session ID`` and of its timeline. They are
read from the sessions' rollup (``collector.usage.session_rollup``, by its key for each session); only the
sessions of the page are priced (each model, UTC day and input band by the reports' price table), all of them
only to sort by cost. A store without a current rollup (one read before the daemon opened it, or a price tier
outside the rollup's bands) is read through the reports' own grouping (``collector.usage.query.grouped``)."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field, replace
from datetime import tzinfo
from decimal import Decimal
from functools import lru_cache, partial
from typing import Any

import collector.usage.search_index as search_index
import collector.usage.session_rollup as session_rollup
from collector.usage.prices import PriceTable
from collector.usage.query import Filters, Totals, grouped, models_present
from collector.usage.report import totals_json
from collector.usage.rollup import representative

SORTS = ("start", "last", "duration", "tokens", "cost", "tool_failures", "calls", "agent")
MAX_LIMIT = 200
_SUMS = ("calls", "input", "cache_read", "cache_write", "output", "reasoning", "tool_calls", "tool_failures", "errors",
         "agent_cost", "agent_cost_calls")


@dataclass(frozen=True, slots=True)
class SessionQuery:
    """What the list is asked for: the window (``since_ns`` inclusive, ``until_ns`` exclusive), the filters
    (exact agent, model, branch; a project or repository by its full text or last path part), the order and
    the page."""

    since_ns: int | None = None
    until_ns: int | None = None
    agent: str | None = None
    project: str | None = None
    repo: str | None = None
    branch: str | None = None
    model: str | None = None
    text: str | None = None  # words of the search (collector.usage.search_index)
    sort: str = "start"
    descending: bool = True
    limit: int = 50
    offset: int = 0


@dataclass(slots=True)
class _Session:
    agent: str
    session: str
    info: tuple[Any, ...]  # project, first_ns, last_ns, status
    totals: Totals = field(default_factory=Totals)
    models: dict[str, int] = field(default_factory=dict)  # model -> calls
    git: dict[tuple[str, str], int] = field(default_factory=dict)  # (repo, branch) -> counted entries
    parts: list[tuple[Any, ...]] = field(default_factory=list)  # (model, provider, day, band, calls, in, cr, cw, out)
    priced: bool = False


def _window(query: SessionQuery) -> tuple[str, list[Any]]:
    clauses = ["s.last_ns >= ?", "s.first_ns < ?"]
    params: list[Any] = [query.since_ns or 0, query.until_ns or 2**63 - 1]
    if query.agent:
        clauses.append("s.agent = ?")
        params.append(query.agent)
    if query.project:
        clauses.append("(s.project = ? OR s.project LIKE ? ESCAPE '\\')")
        params.extend([query.project, f"%/{_escaped(query.project)}"])
    return " AND ".join(clauses), params


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def rollup_sql(query: SessionQuery) -> tuple[str, list[Any]]:
    """The one read of the list: the rollup's rows of every session in the window (by ``sessions_last``, then the
    rollup's key)."""
    where, params = _window(query)
    return (f"SELECT u.agent, u.session, s.project, s.first_ns, s.last_ns, s.status, "
            f"COALESCE(NULLIF(u.model, ''), s.model, ''), u.provider, u.day, u.band, u.repo, u.branch, "
            f"{', '.join('u.' + c for c in _SUMS)}, u.first_ns, u.last_ns "
            f"FROM sessions s JOIN session_usage u ON u.agent = s.agent AND u.session = s.session "
            f"WHERE {where}"), params


def _from_rollup(db: sqlite3.Connection, query: SessionQuery) -> dict[tuple[str, str], _Session]:
    found: dict[tuple[str, str], _Session] = {}
    sql, params = rollup_sql(query)
    for row in db.execute(sql, params):
        agent, session, project, first, last, status, model, provider, day, band, repo, branch = row[:12]
        calls, inp, cr, cw, out, reasoning, tools, fails, errors, agent_cost, agent_calls, lo, hi = row[12:]
        s = found.get((agent, session))
        if s is None:
            s = found[(agent, session)] = _Session(agent, session, (project, first, last, status))
        t = s.totals
        t.calls += calls
        t.input += inp
        t.cache_read += cr
        t.cache_write += cw
        t.output += out
        t.reasoning += reasoning
        t.tool_calls += tools
        t.tool_failures += fails
        t.errors += errors
        if agent_cost is not None:
            t.agent_cost = (t.agent_cost or 0.0) + agent_cost
        t.agent_cost_calls += agent_calls
        t.first_ns = lo if t.first_ns is None else min(t.first_ns, lo)
        t.last_ns = hi if t.last_ns is None else max(t.last_ns, hi)
        if calls:
            s.models[model or "unknown"] = s.models.get(model or "unknown", 0) + calls
            s.parts.append((model, provider, day, band, calls, inp, cr, cw, out))
        s.git[(repo, branch)] = s.git.get((repo, branch), 0) + calls + tools + errors
    return found


def _from_entries(db: sqlite3.Connection, query: SessionQuery, tz: tzinfo,
                  prices: PriceTable) -> dict[tuple[str, str], _Session]:
    """Without a current rollup: the reports' grouping over every time, kept to the sessions in the window."""
    where, params = _window(query)
    info = {(r[0], r[1]): tuple(r[2:]) for r in db.execute(
        f"SELECT s.agent, s.session, s.project, s.first_ns, s.last_ns, s.status FROM sessions s WHERE {where}", params)}
    found: dict[tuple[str, str], _Session] = {}
    filters = Filters(agents=(query.agent,) if query.agent else (), project=query.project)
    for (key, repo, branch), model, totals in grouped(db, ("session", "repo", "branch"), filters, tz, prices):
        agent, _, session = key.partition(" ")
        if (agent, session) not in info:
            continue
        s = found.get((agent, session))
        if s is None:
            s = found[(agent, session)] = _Session(agent, session, info[(agent, session)], priced=True)
        s.totals.add(totals)
        if totals.calls:
            s.models[model] = s.models.get(model, 0) + totals.calls
        s.git[(repo, branch)] = s.git.get((repo, branch), 0) + totals.calls + totals.tool_calls + totals.errors
    return found


def _wanted(s: _Session, query: SessionQuery) -> bool:
    if query.model and query.model not in s.models:
        return False
    if query.repo and not any(r == query.repo or r.endswith("/" + query.repo) for r, _ in s.git):
        return False
    return not query.branch or any(b == query.branch for _, b in s.git)


def _mentions(s: _Session, text: str | None) -> bool:
    """Without a search index (a store read before the daemon built it): every word in the session's labels."""
    if not text:
        return True
    labels = " ".join([s.agent, s.session, str(s.info[0] or ""), *s.models, *(r for g in s.git for r in g)]).lower()
    return all(word.lower() in labels for word in text.split())


@lru_cache(maxsize=4096)
def _day(number: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(number * 86400))


def _price(s: _Session, prices: PriceTable) -> None:
    """The session's cost: each (model, provider, day, band) part at its own rates."""
    if s.priced:
        return
    s.priced = True
    total = Decimal(0)
    for model, provider, day, band, calls, inp, cr, cw, out in s.parts:
        rates = prices.rates(model or None, provider or None, _day(day), representative(band))
        if rates is None:
            s.totals.unpriced_calls += calls
        else:
            total += rates.cost(inp, cr, cw, out)
            s.totals.price_sources.add(rates.source)
    s.totals.cost = total


def _sort_key(sort: str, s: _Session) -> Any:
    if sort == "agent":
        return (s.agent, s.session)
    first, last = s.info[1], s.info[2]
    t = s.totals
    value = {"start": first, "last": last, "duration": (last or 0) - (first or 0), "tokens": t.input + t.output,
             "cost": t.cost if t.priced else None, "tool_failures": t.tool_failures, "calls": t.calls}[sort]
    return (value is not None, value or 0, s.session)


def session_rows(db: sqlite3.Connection, query: SessionQuery, tz: tzinfo, prices: PriceTable,
                 live: frozenset[tuple[str, str]] = frozenset()) -> dict[str, Any]:
    """``{"total": how many match, "rows": the page}`` in the query's order; ``live``: the (agent, session) pairs
    the daemon holds live now (their status reads ``live``, the others their last status or ``closed``)."""
    found = ordered(db, query, tz, prices)
    page = found[query.offset:query.offset + query.limit]
    return {"total": len(found), "offset": query.offset, "limit": query.limit,
            "rows": [_row(s, prices, tz, live) for s in page]}


def ordered(db: sqlite3.Connection, query: SessionQuery, tz: tzinfo, prices: PriceTable) -> list[_Session]:
    """Every session the query matches, in its order (priced only when sorted by cost)."""
    if query.sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}")
    prices.prepare(models_present(db))
    rolled = session_rollup.usable(db, prices.thresholds)
    keys = search_index.matching(db, query.text) if query.text else None
    found = [s for k, s in (_from_rollup(db, query) if rolled else _from_entries(db, query, tz, prices)).items()
             if _wanted(s, query) and (k in keys if keys is not None else _mentions(s, query.text))]
    if query.sort == "cost":
        for s in found:
            _price(s, prices)
    return sorted(found, key=lambda s: _sort_key(query.sort, s), reverse=query.descending)


def top(db: sqlite3.Connection, query: SessionQuery, tz: tzinfo, prices: PriceTable, count: int,
        live: frozenset[tuple[str, str]] = frozenset()) -> dict[str, list[dict[str, Any]]]:
    """The ``count`` first sessions by cost, by tokens and by duration (one read)."""
    found = ordered(db, replace(query, sort="cost", descending=True), tz, prices)
    out = {"cost": found[:count]}
    for sort in ("tokens", "duration"):
        out[sort] = sorted(found, key=partial(_sort_key, sort), reverse=True)[:count]
    return {k: [_row(s, prices, tz, live) for s in v] for k, v in out.items()}


def _row(s: _Session, prices: PriceTable, tz: tzinfo, live: frozenset[tuple[str, str]]) -> dict[str, Any]:
    _price(s, prices)
    project, first_ns, last_ns, status = s.info
    repo, branch = max(s.git, key=lambda g: (s.git[g], g)) if s.git else ("", "")
    models = sorted(s.models, key=lambda m: (-s.models[m], m))
    is_live = (s.agent, s.session) in live
    return {"key": f"{s.agent} {s.session}", "agent": s.agent, "session": s.session, "project": project,
            "repo": repo or None, "branch": branch or None, "model": models[0] if models else None, "models": models,
            "start_unix_nano": first_ns, "last_unix_nano": last_ns,
            "duration_s": None if first_ns is None or last_ns is None else round((last_ns - first_ns) / 1e9, 3),
            "live": is_live, "status": "live" if is_live else status or "closed", **totals_json(s.totals, tz)}
