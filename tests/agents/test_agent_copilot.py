"""GitHub Copilot CLI parser on real captures (tests/fixtures/copilot/*) and on bad lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support import builtin_tracker
from support.agents import by_name, fixture_records, run_pipeline

from collector.agents import copilot
from collector.definitions import load_definitions
from collector.model import RawRecord
from collector.model.entry import UNREADABLE
from collector.pipeline.field_types import FieldTypes

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
    reasons = []
    declared = FieldTypes.of_sources(load_definitions().agents[AGENT].sources)
    for data in bad:
        record = RawRecord(AGENT, "transcript", data, "fp", "0", 1, meta)
        problems = declared.problems(record)  # the pipeline does not parse these, and counts them
        made = [] if problems else copilot.parse(record)
        assert [e for e in made if e.name != UNREADABLE] == []
        reasons += problems + [e.attributes["reason"] for e in made if e.name == UNREADABLE]
    assert reasons == ["type is a number, not a string", "data is a string, not an object",
                       "user message content is a number, not a string", "data.usage is a list, not an object"], \
        "a wrong-typed kind or body is counted (pipeline.unreadable), not dropped silently"
    odd = {"type": "tool.execution_complete", "id": "x", "timestamp": "nope",
           "data": {"toolCallId": "c", "success": False, "error": {"message": "denied"}}}
    (entry,) = copilot.parse(RawRecord(AGENT, "transcript", odd, "fp", "0", 1, meta))
    assert entry.attributes["error.type"] == "tool_error" and entry.attributes["error.message"] == "denied"


def test_a_sub_agents_lines_are_scoped_and_linked_to_the_task_call() -> None:
    log = records("subagent", "transcript")
    entries = run(records("subagent", "hook"), log)
    (task,) = [e for e in by_name(entries, "tool.call") if e["gen_ai.tool.name"] == "task"]
    assert task["gen_ai.tool.type"] == "agent" and "gen_ai.agent.scope" not in task
    inside = [e for e in entries if e.get("gen_ai.agent.scope") == "subagent"]
    agents = {r.data["agentId"] for r in log if r.data.get("agentId")}
    assert len(agents) == 1 and {e["gen_ai.agent.id"] for e in inside} == agents
    assert {e["gen_ai.subagent.parent_tool_call.id"] for e in inside} == {task["gen_ai.tool.call.id"]}
    assert sorted(e["event.name"] for e in inside) == [
        "llm.response", "llm.response", "subagent.end", "subagent.start", "tool.call", "tool.result"]
    (end,) = by_name(entries, "subagent.end")
    assert end["session.reason"] == "completed" and end["gen_ai.subagent.type"] == "general-purpose"
    (result,) = [e for e in by_name(entries, "tool.result") if e["gen_ai.tool.call.id"] == task["gen_ai.tool.call.id"]]
    assert result["gen_ai.subagent.id"] in agents
    asked = [r for r in log if r.data.get("type") == "user.message"]
    assert len(asked) == 2 and len(by_name(entries, "user.prompt")) == 1, "the task's prompt is not a user prompt"


def test_a_sub_agents_hooks_count_for_the_session_and_do_not_end_its_turn() -> None:
    hooks = records("subagent", "hook")
    inner = [r for r in hooks if r.data["payload"].get("parentAgentId")
             and r.data["payload"]["sessionId"] != r.data["payload"]["parentAgentId"]]
    assert {r.data["event"] for r in inner} >= {"userPromptSubmitted", "agentStop"}, "what Copilot sends"
    tracker = builtin_tracker()
    statuses = [e for r in hooks for e in tracker.observe_record(r)]
    assert {e["gen_ai.session.id"] for e in statuses} == {inner[0].data["payload"]["parentAgentId"]}
    assert [(e["session.status"], e["agent.hook_event_name"]) for e in statuses] == [
        ("idle", "sessionStart"), ("running", "userPromptSubmitted"), ("ready_for_review", "agentStop"),
        ("closed", "sessionEnd")]
    assert statuses[2]["time_unix_nano"] > max(r.data["ts"] for r in inner) * 1e9, "the session's own agentStop"


def test_a_failed_sub_agent_ends_with_its_error() -> None:
    meta = {"path": "/h/.copilot/session-state/s1/events.jsonl"}
    line = {"type": "subagent.failed", "id": "e1", "agentId": "a1", "timestamp": "2026-12-01T11:50:17.564Z",
            "data": {"toolCallId": "call_1", "agentName": "general-purpose", "agentDisplayName": "helper",
                     "error": "model unavailable", "durationMs": 12}}
    (end,) = copilot.parse(RawRecord(AGENT, "transcript", line, "fp", "0", 1, meta))
    assert end.name == "subagent.end" and end.session_id == "s1"
    assert end.attributes["gen_ai.subagent.parent_tool_call.id"] == "call_1"
    assert end.attributes["error.type"] == "subagent_failed" and end.attributes["error.message"] == "model unavailable"
    assert end.attributes["session.reason"] == "failed" and end.attributes["duration_ms"] == 12
    line["data"] = {"agentName": "x"}  # no toolCallId: nothing to link, nothing made
    assert copilot.parse(RawRecord(AGENT, "transcript", line, "fp", "0", 1, meta)) == []
