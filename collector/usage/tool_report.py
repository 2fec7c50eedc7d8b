"""``report tools``: per tool, its calls, failures, time, the size of its results and the context they cost.

A tool result is sent back to the model with every later call of the same context (the agent's session, or
the subagent's own conversation inside it). Its *context cost* is therefore estimated as its tokens (its size
in bytes / ``BYTES_PER_TOKEN``, rounded up: no tokenizer sees the result here) times the number of model calls
of that context after it. It is an estimate: a compaction that drops the result is not modelled, and the
cache makes the repeated tokens cheaper (docs/reports.md says how to read it)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collector.usage.event_rows import BYTES_PER_TOKEN, LaterCalls, Row, load, share
from collector.usage.query import Filters


@dataclass(slots=True)
class ToolTotals:
    tool: str
    calls: int = 0
    results: int = 0
    failures: int = 0
    duration_ms: float = 0.0
    timed: int = 0  # results with a duration
    result_bytes: int = 0
    result_tokens: int = 0
    context_tokens: int = 0

    def json(self, all_context: int) -> dict[str, Any]:
        return {
            "tool": self.tool, "calls": max(self.calls, self.results), "results": self.results,
            "failures": self.failures, "failure_rate": share(self.failures, self.results),
            "duration_ms": round(self.duration_ms, 3),
            "mean_duration_ms": round(self.duration_ms / self.timed, 3) if self.timed else None,
            "result_bytes": self.result_bytes, "result_tokens_est": self.result_tokens,
            "context_tokens_est": self.context_tokens, "context_share": share(self.context_tokens, all_context),
        }


def tool_totals(rows: Sequence[Row]) -> dict[str, ToolTotals]:
    later = LaterCalls(rows)
    tools: dict[str, ToolTotals] = {}
    for row in rows:
        if row.name not in ("tool.call", "tool.result"):
            continue
        totals = tools.setdefault(row.tool or "unknown", ToolTotals(row.tool or "unknown"))
        if row.name == "tool.call":
            totals.calls += 1
            continue
        totals.results += 1
        totals.failures += row.tool_status == "error"
        if row.duration_ms is not None:
            totals.duration_ms += row.duration_ms
            totals.timed += 1
        tokens = row.result_tokens
        totals.result_bytes += row.result_bytes or 0
        totals.result_tokens += tokens
        totals.context_tokens += tokens * later.after(row)
    return tools


def build_tools(db: sqlite3.Connection, filters: Filters) -> dict[str, Any]:
    tools = tool_totals(load(db, filters))
    context = sum(t.context_tokens for t in tools.values())
    rows = [t.json(context) for t in sorted(tools.values(), key=lambda t: (-t.context_tokens, t.tool))]
    total = {key: sum(r[key] for r in rows) for key in ("calls", "results", "failures", "result_bytes",
                                                        "result_tokens_est", "context_tokens_est")}
    total["duration_ms"] = round(sum(r["duration_ms"] for r in rows), 3)
    total["failure_rate"] = share(total["failures"], total["results"])
    return {"report": "tools", "bytes_per_token": BYTES_PER_TOKEN, "rows": rows, "total": total}
