"""``report findings``: patterns that waste tokens, each with its evidence and a suggestion.

- ``dominant_tool``: one tool's results are at least ``dominant_share`` of the context all tool results cost
  (``collector.usage.tool_report``) and at least ``dominant_tokens`` of it;
- ``repeated_read``: one context (session, or subagent) calls a tool with the same arguments (the same digest)
  ``repeat_at`` times or more: the result was in the context already;
- ``retry_loop``: ``retry_at`` or more results of one tool in a row in one context all failed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collector.usage.event_rows import Row, load
from collector.usage.query import Filters
from collector.usage.tool_report import tool_totals


@dataclass(frozen=True, slots=True)
class Thresholds:
    dominant_share: float = 0.5
    dominant_tokens: int = 20_000
    repeat_at: int = 2
    retry_at: int = 3


def dominant(rows: Sequence[Row], limits: Thresholds) -> list[dict[str, Any]]:
    tools = tool_totals(rows)
    context = sum(t.context_tokens for t in tools.values())
    found = []
    for tool in sorted(tools.values(), key=lambda t: -t.context_tokens):
        if context and tool.context_tokens >= limits.dominant_tokens and \
                tool.context_tokens / context >= limits.dominant_share:
            found.append({"kind": "dominant_tool", "tool": tool.tool, "evidence": {
                "context_tokens_est": tool.context_tokens, "all_tools_context_tokens_est": context,
                "share": round(tool.context_tokens / context, 6), "results": tool.results,
                "result_tokens_est": tool.result_tokens},
                "suggestion": f"{tool.tool}'s output fills the context: narrow what it returns (a line range, a "
                              f"search pattern, head/tail, a quieter flag) or have a subagent run it"})
    return found


def repeated(rows: Sequence[Row], limits: Thresholds) -> list[dict[str, Any]]:
    calls: dict[tuple[str, str, str, str, str], list[Row]] = {}
    called = {r.call_id for r in rows if r.name == "tool.call" and r.call_id}
    for row in rows:  # a call, or the result of a call the agent kept no call entry of
        if row.args_digest and (row.name == "tool.call" or row.name == "tool.result" and row.call_id not in called):
            calls.setdefault((*row.stream, row.tool, row.args_digest), []).append(row)
    found = []
    for (agent, session, agent_id, tool, digest), same in sorted(calls.items()):
        if len(same) >= limits.repeat_at:
            found.append({"kind": "repeated_read", "tool": tool, "evidence": {
                "agent": agent, "session": session, "subagent": agent_id or None, "calls": len(same),
                "arguments_digest": digest, "turns": sorted({r.turn for r in same if r.turn}),
                "times_unix_nano": [r.time_ns for r in same]},
                "suggestion": f"{tool} was called {len(same)} times with the same arguments in one context: its "
                              f"earlier result is still there; keep the first (or ask for the part that changed)"})
    return found


def retries(rows: Sequence[Row], limits: Thresholds) -> list[dict[str, Any]]:
    runs: dict[tuple[str, str, str, str], list[Row]] = {}
    found = []

    def close(key: tuple[str, str, str, str]) -> None:
        run = runs.pop(key, [])
        if len(run) >= limits.retry_at:
            found.append({"kind": "retry_loop", "tool": key[3], "evidence": {
                "agent": key[0], "session": key[1], "subagent": key[2] or None, "failures_in_a_row": len(run),
                "turns": sorted({r.turn for r in run if r.turn}), "first_unix_nano": run[0].time_ns,
                "last_unix_nano": run[-1].time_ns},
                "suggestion": f"{key[3]} failed {len(run)} times in a row: stop and read the error (or give the "
                              f"agent the missing permission, file or tool) instead of retrying"})

    for row in rows:
        if row.name != "tool.result":
            continue
        key = (*row.stream, row.tool)
        if row.tool_status == "error":
            runs.setdefault(key, []).append(row)
        else:
            close(key)
    for key in sorted(runs):
        close(key)
    return found


def build_findings(db: sqlite3.Connection, filters: Filters, limits: Thresholds | None = None) -> dict[str, Any]:
    limits = limits or Thresholds()
    rows = load(db, filters)
    found = dominant(rows, limits) + repeated(rows, limits) + retries(rows, limits)
    return {"report": "findings", "thresholds": {"dominant_share": limits.dominant_share,
                                                 "dominant_tokens": limits.dominant_tokens,
                                                 "repeat_at": limits.repeat_at, "retry_at": limits.retry_at},
            "rows": found}
