"""``report session ID``: one session turn by turn, each subagent's calls rolled up into the turn of the tool
call that started it (``gen_ai.subagent.parent_tool_call.id``), and listed under it with its own totals."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any

from collector.usage.event_rows import CallSums, Pricer, Row, load, sessions_like
from collector.usage.prices import PriceTable
from collector.usage.query import Filters


@dataclass(slots=True)
class Sums(CallSums):
    tool_calls: int = 0
    tool_failures: int = 0
    errors: int = 0
    prompts: int = 0
    first_ns: int | None = None

    def add_row(self, row: Row, pricer: Pricer) -> None:
        self.first_ns = row.time_ns if self.first_ns is None else min(self.first_ns, row.time_ns)
        if row.name == "llm.response":
            self.add_call(row, pricer)
        self.tool_calls += row.name == "tool.call"
        self.tool_failures += row.name == "tool.result" and row.tool_status == "error"
        self.errors += row.name == "error"
        self.prompts += row.name == "user.prompt"

    def json(self) -> dict[str, Any]:
        return {**self.tokens_json(), "tool_calls": self.tool_calls,
                "tool_failures": self.tool_failures, "errors": self.errors, "prompts": self.prompts}


@dataclass(slots=True)
class Turn:
    key: str
    sums: Sums = field(default_factory=Sums)
    subagents: dict[str, Sums] = field(default_factory=dict)


def parent_turns(rows: Sequence[Row]) -> dict[str, str]:
    """subagent id -> the turn of the main agent's tool call that started it (its own turn when none is known)."""
    call_turns = {r.call_id: r.turn for r in rows if r.name == "tool.call" and not r.agent_id and r.call_id}
    own: dict[str, str] = {}
    parents: dict[str, str] = {}
    for row in rows:
        if not row.agent_id:
            continue
        own.setdefault(row.agent_id, row.turn)
        if row.agent_id not in parents and row.parent_call in call_turns:
            parents[row.agent_id] = call_turns[row.parent_call]
    for agent_id, turn in own.items():
        parents.setdefault(agent_id, turn)
    return parents


def turns_of(rows: Sequence[Row], pricer: Pricer) -> list[Turn]:
    parents = parent_turns(rows)
    turns: dict[str, Turn] = {}
    for row in rows:
        key = parents.get(row.agent_id, row.turn) if row.agent_id else row.turn
        turn = turns.setdefault(key, Turn(key))
        turn.sums.add_row(row, pricer)
        if row.agent_id:
            turn.subagents.setdefault(row.agent_id, Sums()).add_row(row, pricer)
    return sorted(turns.values(), key=lambda t: (t.sums.first_ns or 0, t.key))


def build_session(db: sqlite3.Connection, text: str, tz: tzinfo, prices: PriceTable | None = None) -> dict[str, Any]:
    """The session named by its id or a unique start of it; ValueError when none or several match."""
    found = sessions_like(db, text)
    if not found:
        raise ValueError(f"no session {text!r} in the usage store")
    if len(found) > 1:
        raise ValueError(f"{text!r} names {len(found)} sessions: " + ", ".join(f"{a} {s}" for a, s in found[:10]))
    agent, session = found[0]
    pricer = Pricer(db, prices or PriceTable())
    turns = turns_of(load(db, Filters(agents=(agent,)), session), pricer)
    total = Sums()
    rows = []
    for number, turn in enumerate(turns, 1):
        for name in ("calls", "input", "cache_read", "cache_write", "output", "cost", "unpriced_calls", "tool_calls",
                     "tool_failures", "errors", "prompts"):
            setattr(total, name, getattr(total, name) + getattr(turn.sums, name))
        rows.append({"turn": number, "turn_id": turn.key or None, "start": _iso(turn.sums.first_ns, tz),
                     **turn.sums.json(),
                     "subagents": [{"id": k, **s.json()} for k, s in sorted(turn.subagents.items())]})
    return {"report": "session", "agent": agent, "session": session, "price_table": pricer.prices.version,
            "rows": rows, "total": total.json()}


def _iso(time_ns: int | None, tz: tzinfo) -> str | None:
    return None if time_ns is None else datetime.fromtimestamp(time_ns / 1e9, tz).isoformat(timespec="seconds")
