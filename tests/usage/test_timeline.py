"""A session's timeline on real fixture sessions (collected by the real pipeline): its turns are those of
``report session ID`` with the same numbers, every model call and tool call of the store is in it once, each
tool call carries its result's outcome and size, each subagent sits under the tool call that started it, and a
compaction is marked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from support import FIXTURES
from support.usage import collected, store_db

from collector.usage.event_rows import NAMES
from collector.usage.prices import PriceTable
from collector.usage.session_detail import build_session
from collector.usage.timeline import timeline

UTC = ZoneInfo("UTC")
CASES = sorted(p.parent for p in FIXTURES.glob("*/*/expected.json")
               if "legacy" not in p.parent.name and ("subagent" in p.parent.name or "compaction" in p.parent.name
                                                     or "failing" in p.parent.name))
IDS = [f"{c.parent.name}/{c.name}" for c in CASES]


def _flat(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for e in events:
        out.append(e)
        out += _flat(e.get("events", []))
        for sub in e.get("subagents", []):
            out += [sub, *_flat(sub["events"])]
    return out


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_timeline_matches_the_report_and_the_store(case: Path, tmp_path: Path) -> None:
    paths = collected(case, tmp_path)
    expected = json.loads((case / "expected.json").read_text())
    db = store_db(paths)
    try:
        sessions = db.execute("SELECT agent, session FROM sessions").fetchall()
        assert sessions
        nested = 0
        for agent, session in sessions:
            view = timeline(db, agent, session, UTC, PriceTable(), False)
            assert view is not None
            report = build_session(db, session, UTC, PriceTable())
            assert [t["turn"] for t in view["turns"]] == [r["turn"] for r in report["rows"]]
            for turn, row in zip(view["turns"], report["rows"], strict=True):
                for key in ("calls", "input_tokens", "cache_read_tokens", "output_tokens", "cost_usd", "tool_calls",
                            "tool_failures", "errors"):
                    assert turn[key] == row[key], (session, turn["turn"], key)
                flat = _flat(turn["events"])
                models = [e for e in flat if e["kind"] == "model"]
                assert len(models) == turn["calls"]
                assert sum(e["input_tokens"] for e in models) == turn["input_tokens"]
                assert sum(e["cost_usd"] or 0 for e in models) == pytest.approx(turn["cost_usd"] or 0, abs=1e-9)
                assert len([e for e in flat if e["kind"] == "tool"]) >= turn["tool_calls"]
                assert sorted(turn["subagents"]) == sorted(s["id"] for s in row["subagents"])
            _tools_match(db, view, expected)
            nested += _subagents_nested(db, view, agent, session)
            stored = db.execute("SELECT COUNT(*) FROM events WHERE name = 'compaction' AND session = ?",
                                (session,)).fetchone()[0]
            assert len(view["compactions"]) == stored
            if "compaction" in case.name:
                assert stored and all(c["turn"] for c in view["compactions"])
        if "subagent" in case.name:
            assert nested, "the fixture's subagent sits under the tool call that started it"
    finally:
        db.close()


def _tools_match(db: Any, view: dict[str, Any], expected: dict[str, Any]) -> None:
    tools = [e for t in view["turns"] for e in _flat(t["events"]) if e["kind"] == "tool"]
    for tool in tools:
        if tool["call_id"] in expected.get("tools", {}):
            truth = expected["tools"][tool["call_id"]]
            assert tool["tool"] == truth["name"]
            assert tool["outcome"] == truth["status"]
        size = db.execute("SELECT result_bytes FROM events WHERE name = 'tool.result' AND call_id = ?",
                          (tool["call_id"],)).fetchone()
        if size is not None:
            assert tool["result_bytes"] == size[0]
    ids = [t["call_id"] for t in tools if t["call_id"]]
    assert len(ids) == len(set(ids)), "a tool call once"


def _subagents_nested(db: Any, view: dict[str, Any], agent: str, session: str) -> int:
    """How many subagents sit under their parent tool call (each checked against the store's parent call id)."""
    names = ",".join(f"'{n}'" for n in NAMES)  # a subagent with only subagent.end has nothing to show
    parents = dict(db.execute(f"SELECT agent_id, MAX(parent_call) FROM events WHERE agent = ? AND session = ? AND "
                              f"agent_id IS NOT NULL AND name IN ({names}) GROUP BY agent_id", (agent, session)))
    calls = {c for (c,) in db.execute("SELECT call_id FROM events WHERE name = 'tool.call' AND agent_id IS NULL "
                                      "AND session = ?", (session,))}
    found: dict[str, str | None] = {}
    for turn in view["turns"]:
        for e in _flat(turn["events"]):
            for sub in e.get("subagents", []):
                found[sub["id"]] = e["call_id"]
            if e["kind"] == "subagent" and e["id"] not in found:
                found[e["id"]] = None
    assert set(found) == set(parents)
    for sub, parent in parents.items():
        assert found[sub] == (parent if parent in calls else None), sub
    return sum(v is not None for v in found.values())
