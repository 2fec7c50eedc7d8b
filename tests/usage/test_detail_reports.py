"""The detail reports (``report tools``, ``report session ID``, ``report models --compare``, ``report findings``)
on real fixture homes of every agent, against totals worked out here from the fixture's own files: the tools,
their outcomes and the subagents in ``expected.json`` (written when the fixture was captured), the tokens and
models in the model server's ``response_usage.jsonl``. The context cost is an estimate over the pipeline's
output (a result's ``gen_ai.tool.call.result.length`` and the model calls after it in the JSONL file), worked
out here without the report's code."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from support import FIXTURES, entry_tokens, read_output, usage_tuple
from support.usage import collected, recorded, store_db

from collector.usage.findings import Thresholds, build_findings
from collector.usage.model_compare import build_compare
from collector.usage.query import Filters
from collector.usage.session_detail import build_session
from collector.usage.tool_report import build_tools

ALL_CASES = sorted(p.parent for p in FIXTURES.glob("*/*/expected.json") if "legacy" not in p.parent.name)
ALL_IDS = [f"{c.parent.name}/{c.name}" for c in ALL_CASES]
CASES = [c for c in ALL_CASES
         if (c / "response_usage.jsonl").is_file() and (c / "response_usage.jsonl").read_text().strip()]
IDS = [f"{c.parent.name}/{c.name}" for c in CASES]  # the cases with the model server's records (Kimi's has none)
UTC = ZoneInfo("UTC")


def test_the_cases_cover_every_agent_with_captured_sessions() -> None:
    assert {c.parent.name for c in CASES} | {"kimi"} == {c.parent.name for c in ALL_CASES}
    agents = {c.parent.name for c in ALL_CASES}
    assert agents >= {"claude-code", "codex", "gemini-cli", "qwen-code", "opencode", "cline", "copilot",
                      "kilo-code", "kimi", "pi", "oh-my-pi"}


def _expected(case: Path) -> dict[str, Any]:
    return dict(json.loads((case / "expected.json").read_text()))


def _hand_context(entries: list[dict[str, Any]]) -> dict[str, int]:
    """Per tool: every result's bytes / 4 rounded up, times the model calls of its context after it."""
    def stream(e: dict[str, Any]) -> tuple[Any, ...]:
        sub = e.get("gen_ai.agent.id") if e.get("gen_ai.agent.scope") == "subagent" else None
        return e["gen_ai.agent.type"], e.get("gen_ai.session.id"), sub

    calls = defaultdict(list)
    for e in entries:
        if e["event.name"] == "llm.response":
            calls[stream(e)].append(e["time_unix_nano"])
    out: Counter[str] = Counter()
    for e in entries:
        if e["event.name"] == "tool.result":
            size = e.get("gen_ai.tool.call.result.length") or 0
            later = sum(t > e["time_unix_nano"] for t in calls[stream(e)])
            out[e.get("gen_ai.tool.name") or "unknown"] += math.ceil(size / 4) * later
    return dict(out)


@pytest.mark.parametrize("case", ALL_CASES, ids=ALL_IDS)
def test_tools_report_counts_the_fixtures_tools(case: Path, tmp_path: Path) -> None:
    paths = collected(case, tmp_path)
    tools = _expected(case)["tools"]
    db = store_db(paths)
    try:
        report = build_tools(db, Filters())
    finally:
        db.close()
    hand_calls = Counter(t["name"] for t in tools.values())
    hand_failures = Counter(t["name"] for t in tools.values() if t["status"] == "error")
    assert {r["tool"]: r["calls"] for r in report["rows"]} == dict(hand_calls)
    assert {r["tool"]: r["failures"] for r in report["rows"] if r["failures"]} == dict(hand_failures)
    assert report["total"]["calls"] == len(tools)
    context = _hand_context(read_output(paths.output_dir))
    assert {r["tool"]: r["context_tokens_est"] for r in report["rows"] if r["context_tokens_est"]} == \
        {k: v for k, v in context.items() if v}
    if any(context.values()):
        assert report["rows"][0]["context_tokens_est"] == max(context.values()), "the costliest tool first"


def _token_sums(records: list[dict[str, Any]]) -> dict[str, int]:
    out = Counter[str]()
    for record in records:
        inp, outp, cr, cw = usage_tuple(record["api"], record["usage"])
        out.update(calls=1, input_tokens=inp, output_tokens=outp, cache_read_tokens=cr, cache_write_tokens=cw)
    return {k: out[k] for k in ("calls", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")}


def _pick(row: dict[str, Any]) -> dict[str, int]:
    return {k: row[k] for k in ("calls", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_models_compare_equals_the_model_server_per_model(case: Path, tmp_path: Path) -> None:
    paths = collected(case, tmp_path)
    truth = recorded(case, entry_tokens(read_output(paths.output_dir)))
    expected = _expected(case)
    db = store_db(paths)
    try:
        report = build_compare(db, Filters())
    finally:
        db.close()
    rows = {r["model"]: r for r in report["rows"]}
    assert set(rows) == {r["model"] for r in truth}
    for model, row in rows.items():
        assert _pick(row) == _token_sums([r for r in truth if r["model"] == model])
    if len(rows) == 1:  # one model did all the work: the fixture's tools and turns are its own
        (row,) = rows.values()
        failures = sum(t["status"] == "error" for t in expected["tools"].values())
        assert row["tool_failures"] == failures
        assert row["tasks"] <= len(expected["turns"])
        assert row["turns_per_task"] == round(len(truth) / row["tasks"], 3)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_session_report_turn_by_turn_with_subagents_in_their_parent(case: Path, tmp_path: Path) -> None:
    paths = collected(case, tmp_path)
    truth = recorded(case, entry_tokens(read_output(paths.output_dir)))
    expected = _expected(case)
    db = store_db(paths)
    try:
        reports = [build_session(db, session, UTC) for session in expected["sessions"]
                   if db.execute("SELECT 1 FROM sessions WHERE session = ?", (session,)).fetchone()]
    finally:
        db.close()
    assert reports, "the fixture's session is in the store"
    assert sum((Counter(_pick(r["total"])) for r in reports), Counter()) == Counter(
        {k: v for k, v in _token_sums(truth).items() if v})
    turns = [row for r in reports for row in r["rows"]]
    assert {t["turn_id"] for t in turns if t["turn_id"]} <= set(expected["turns"])
    for report in reports:
        for key in ("calls", "input_tokens", "output_tokens", "tool_calls"):
            assert sum(t[key] for t in report["rows"]) == report["total"][key]
    listed = Counter(sub["id"] for t in turns for sub in t["subagents"])
    # the fixture's subagents, and those the agent ran on its own (Qwen Code's managed-auto-memory-extractor)
    entries = read_output(paths.output_dir)
    assert set(expected.get("subagents", {})) <= set(listed) == {
        e["gen_ai.agent.id"] for e in entries if e.get("gen_ai.agent.scope") == "subagent" and
        e["event.name"] in ("llm.response", "tool.call", "tool.result", "error", "user.prompt", "subagent.start")}
    assert all(n == 1 for n in listed.values()), "a subagent is rolled up into one turn"
    for turn in turns:
        for sub in turn["subagents"]:
            assert turn["calls"] >= sub["calls"] and turn["input_tokens"] >= sub["input_tokens"]


@pytest.mark.parametrize("case", ALL_CASES, ids=ALL_IDS)
def test_findings_name_each_failing_tool_and_the_dominant_one(case: Path, tmp_path: Path) -> None:
    paths = collected(case, tmp_path)
    tools = _expected(case)["tools"]
    db = store_db(paths)
    try:
        report = build_findings(db, Filters(), Thresholds(retry_at=1, dominant_tokens=1))
        default = build_findings(db, Filters())
    finally:
        db.close()
    loops = Counter[str]()
    for finding in (f for f in report["rows"] if f["kind"] == "retry_loop"):
        loops[finding["tool"]] += finding["evidence"]["failures_in_a_row"]
        assert finding["suggestion"]
    assert loops == Counter(t["name"] for t in tools.values() if t["status"] == "error")
    context = _hand_context(read_output(paths.output_dir))
    whole = sum(context.values())
    dominant = {k for k, v in context.items() if whole and v >= 1 and v / whole >= 0.5}
    assert {f["tool"] for f in report["rows"] if f["kind"] == "dominant_tool"} == dominant
    assert not [f for f in default["rows"] if f["kind"] == "repeated_read"], "no fixture repeats a call"
