"""A session's timeline for the dashboard: its turns in order (numbered and summed as ``report session ID`` does,
``collector.usage.session_detail``), and in each turn its events in time order: model calls (tokens with the
cache apart, cost, latency), tool calls paired with their results (name, duration, outcome, result size),
errors, compactions; a subagent's events nested under the tool call that started it.

Read from ``events`` through the reports' own loader (``event_rows.load``), bounded by the session's first and
last time from ``sessions`` so the ``events_time`` index (name, time) narrows the read; numbers and labels only
(the store keeps no prompt or tool text; an error's message only when content capture kept it)."""

from __future__ import annotations

import sqlite3
from datetime import tzinfo
from typing import Any

from collector.usage.event_rows import Pricer, Row, load, money
from collector.usage.prices import PriceTable
from collector.usage.query import Filters
from collector.usage.session_detail import parent_turns, turns_of

COMPACTION_SQL = ("SELECT time_ns, COALESCE(turn, ''), detail FROM events "
                  "WHERE name = 'compaction' AND time_ns >= ? AND time_ns <= ? AND agent = ? AND session = ? "
                  "ORDER BY time_ns")
ERROR_SQL = ("SELECT time_ns, detail FROM events WHERE name = 'error' AND time_ns >= ? AND time_ns <= ? "
             "AND agent = ? AND session = ? ORDER BY time_ns")


def bounds(db: sqlite3.Connection, agent: str, session: str) -> tuple[int, int] | None:
    row = db.execute("SELECT first_ns, last_ns FROM sessions WHERE agent = ? AND session = ?",
                     (agent, session)).fetchone()
    return None if row is None else (int(row[0]), int(row[1]))


def timeline(db: sqlite3.Connection, agent: str, session: str, tz: tzinfo, prices: PriceTable,
             capture: bool) -> dict[str, Any] | None:
    """None when the store has no such session."""
    span = bounds(db, agent, session)
    if span is None:
        return None
    first, last = span
    rows = load(db, Filters(since_ns=first, until_ns=last + 1, agents=(agent,)), session)
    pricer = Pricer(db, prices)
    turns = turns_of(rows, pricer)
    number = {t.key: i for i, t in enumerate(turns, 1)}
    parents = parent_turns(rows)
    events: dict[str, list[dict[str, Any]]] = {t.key: [] for t in turns}
    results = {r.call_id: r for r in rows if r.name == "tool.result" and r.call_id}
    by_call: dict[str, dict[str, Any]] = {}
    nested: list[tuple[Row, dict[str, Any]]] = []
    for row in rows:
        item = _item(row, results, pricer)
        if item is None:
            continue
        if row.name == "tool.call" and row.call_id:
            by_call[row.call_id] = item
        turn = parents.get(row.agent_id, row.turn) if row.agent_id else row.turn
        if row.agent_id:
            nested.append((row, item))
        else:
            events.setdefault(turn, []).append(item)
    _nest(nested, by_call, events, parents)
    errors = {int(r[0]): r[1] for r in db.execute(ERROR_SQL, (first, last, agent, session))}
    for turn_events in events.values():
        for item in turn_events:
            if item["kind"] == "error" and capture and errors.get(item["time_unix_nano"]):
                item["detail"] = errors[item["time_unix_nano"]]
    compactions = [{"kind": "compaction", "time_unix_nano": r[0], "turn": number.get(r[1])}
                   for r in db.execute(COMPACTION_SQL, (first, last, agent, session))]
    return {"agent": agent, "session": session, "start_unix_nano": first, "last_unix_nano": last,
            "price_table": prices.version, "content_capture": capture, "compactions": compactions,
            "turns": [{"turn": number[t.key], "turn_id": t.key or None, **t.sums.json(),
                       "subagents": sorted(t.subagents), "events": events.get(t.key, [])} for t in turns]}


def _nest(nested: list[tuple[Row, dict[str, Any]]], by_call: dict[str, dict[str, Any]],
          events: dict[str, list[dict[str, Any]]], parents: dict[str, str]) -> None:
    """Each subagent's events go under the tool call that started it; without a known parent call, into a group
    of their own at the end of the turn they are counted in."""
    groups: dict[str, dict[str, Any]] = {}
    for row, item in nested:
        group = groups.get(row.agent_id)
        if group is None:
            group = groups[row.agent_id] = {"kind": "subagent", "id": row.agent_id, "time_unix_nano": row.time_ns,
                                            "events": []}
            parent = by_call.get(row.parent_call) if row.parent_call else None
            if parent is not None:
                parent.setdefault("subagents", []).append(group)
            else:
                events.setdefault(parents.get(row.agent_id, row.turn), []).append(group)
        group["events"].append(item)


def _item(row: Row, results: dict[str, Row], pricer: Pricer) -> dict[str, Any] | None:
    base: dict[str, Any] = {"time_unix_nano": row.time_ns}
    if row.name == "llm.response":
        return {**base, "kind": "model", "model": row.model or None, "input_tokens": row.input,
                "uncached_input_tokens": max(row.input - row.cache_read - row.cache_write, 0),
                "cache_read_tokens": row.cache_read, "cache_write_tokens": row.cache_write,
                "output_tokens": row.output, "cost_usd": money(pricer.cost(row)), "latency_ms": row.duration_ms}
    if row.name == "tool.call":
        result = results.get(row.call_id) if row.call_id else None
        duration = result.duration_ms if result is not None and result.duration_ms is not None else (
            round((result.time_ns - row.time_ns) / 1e6, 3) if result is not None else None)
        return {**base, "kind": "tool", "tool": row.tool or None, "call_id": row.call_id or None,
                "duration_ms": duration, "outcome": (result.tool_status or "done") if result else "no result",
                "result_bytes": result.result_bytes if result else None}
    if row.name == "tool.result" and not (row.call_id and row.call_id in results):
        return {**base, "kind": "tool", "tool": row.tool or None, "call_id": None, "duration_ms": row.duration_ms,
                "outcome": row.tool_status or "done", "result_bytes": row.result_bytes}
    if row.name == "error":
        return {**base, "kind": "error"}
    if row.name == "user.prompt":
        return {**base, "kind": "prompt"}
    return None
