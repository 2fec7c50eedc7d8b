"""``report models --compare``: each model on your own work: tokens, cost, tool failure rate and turns per task.

A *task* is a turn (a prompt and everything the agent did for it); its model is the model of its calls, and
a turn that used two models counts for each. *Turns per task* are the model calls (the agent's round trips)
per task. Tool results count for the model of their turn (``turn`` of the entries; a tool result outside any
turn counts for none)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from collector.usage.event_rows import CallSums, Pricer, Row, load, money, share
from collector.usage.prices import PriceTable
from collector.usage.query import Filters


@dataclass(slots=True)
class ModelSums(CallSums):
    model: str = ""
    tool_results: int = 0
    tool_failures: int = 0
    tasks: set[tuple[str, str, str]] = field(default_factory=set)
    agents: set[str] = field(default_factory=set)

    def json(self) -> dict[str, Any]:
        tasks = len(self.tasks)
        return {"model": self.model, "agents": sorted(self.agents), **self.tokens_json(),
                "cost_per_call_usd": _per(self.cost, self.calls),
                "cache_hit_rate": share(self.cache_read, self.input), "tool_results": self.tool_results,
                "tool_failures": self.tool_failures, "tool_failure_rate": share(self.tool_failures, self.tool_results),
                "tasks": tasks, "turns_per_task": round(self.calls / tasks, 3) if tasks else None}


def _per(cost: Decimal, calls: int) -> float | None:
    return money(cost / calls) if calls else None


def compare(rows: Sequence[Row], pricer: Pricer) -> list[ModelSums]:
    models: dict[str, ModelSums] = {}
    turn_models: dict[tuple[str, str, str], set[str]] = {}
    for row in rows:
        if row.name != "llm.response":
            continue
        sums = models.setdefault(row.model or "unknown", ModelSums(model=row.model or "unknown"))
        sums.add_call(row, pricer)
        sums.agents.add(row.agent)
        if row.turn:
            task = (row.agent, row.session, row.turn)
            sums.tasks.add(task)
            turn_models.setdefault(task, set()).add(sums.model)
    for row in rows:
        if row.name == "tool.result" and row.turn:
            for model in turn_models.get((row.agent, row.session, row.turn), ()):
                models[model].tool_results += 1
                models[model].tool_failures += row.tool_status == "error"
    return sorted(models.values(), key=lambda m: m.model)


def build_compare(db: sqlite3.Connection, filters: Filters, prices: PriceTable | None = None) -> dict[str, Any]:
    pricer = Pricer(db, prices or PriceTable())
    models = compare(load(db, filters), pricer)
    return {"report": "models", "compare": True, "price_table": pricer.prices.version,
            "rows": [m.json() for m in models]}
