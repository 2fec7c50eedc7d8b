"""GitHub Copilot CLI parser on real captures (tests/fixtures/copilot/*) and on bad lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_support import by_name, fixture_records, run_pipeline

from collector.agents import copilot
from collector.model import RawRecord

AGENT = "copilot"


def records(case: str, kind: str) -> list[RawRecord]:
    return fixture_records(AGENT, case, kind)


def run(*batches: list[RawRecord]) -> list[dict[str, Any]]:
    return run_pipeline(AGENT, copilot.parse, batches)


def test_exit_code_1_reported_as_success_by_copilot_is_an_error() -> None:
    log = records("failing_command", "transcript")
    done = [r.data["data"] for r in log if r.data.get("type") == "tool.execution_complete"]
    assert [(d["success"], d["shellExecution"]["exitCode"]) for d in done] == [(True, 1)]  # what Copilot says
    (result,) = by_name(run(records("failing_command", "hook"), log), "tool.result")
    assert result["tool.result.status"] == "error" and result["process.exit.code"] == 1
    assert result["error.type"] == "exit_code" and result["gen_ai.tool.name"] == "bash"


def test_hooks_make_no_entry_and_the_session_id_is_the_log_folder() -> None:
    hooks = records("tool_then_answer", "hook")
    assert hooks and all(copilot.parse(r) == [] for r in hooks)
    log = records("tool_then_answer", "transcript")
    sessions = {e["gen_ai.session.id"] for e in run(log) if "gen_ai.session.id" in e}
    assert sessions == {Path(log[0].meta["path"]).parent.name}


def test_model_calls_carry_the_provider_response_id_and_tokens() -> None:
    responses = by_name(run(records("tool_then_answer", "transcript")), "llm.response")
    assert len(responses) == 2
    assert all(r["gen_ai.response.id"].startswith("chatcmpl-") for r in responses)
    assert all(r["gen_ai.usage.input_tokens"] > r["gen_ai.usage.cache_read.input_tokens"] > 0 for r in responses)


def test_bad_lines_give_nothing_and_do_not_raise() -> None:
    meta = {"path": "/h/.copilot/session-state/s1/events.jsonl"}
    bad: list[dict[str, Any]] = [
        {}, {"type": 3}, {"type": "user.message", "id": "x", "data": "text"},
        {"type": "user.message", "id": "x", "data": {"content": 5}},
        {"type": "session.usage_record", "id": "x", "data": {"usage": [1]}},
        {"type": "tool.execution_complete", "id": "x", "data": {"toolCallId": None}},
        {"type": "tool.execution_start", "id": None, "data": {"toolCallId": "c"}},
    ]
    for data in bad:
        assert copilot.parse(RawRecord(AGENT, "transcript", data, "fp", "0", 1, meta)) == []
    odd = {"type": "tool.execution_complete", "id": "x", "timestamp": "nope",
           "data": {"toolCallId": "c", "success": False, "error": {"message": "denied"}}}
    (entry,) = copilot.parse(RawRecord(AGENT, "transcript", odd, "fp", "0", 1, meta))
    assert entry.attributes["error.type"] == "tool_error" and entry.attributes["error.message"] == "denied"
