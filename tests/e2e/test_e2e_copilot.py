"""Real GitHub Copilot CLI 1.0.102 (`@github/copilot`, offline: COPILOT_OFFLINE with a BYOK OpenAI
provider) against the fake Chat Completions server, with the collector installed by `agent-collector
install` (command hooks in ~/.copilot/settings.json, Copilot's plain hook-list layout) into a throwaway
HOME: three scenarios, every acceptance fact checked. Copilot's hooks carry no prompt, model-call or tool
id, so the session log (session-state/<id>/events.jsonl) makes every entry and the hooks drive the live
status; a shell command that exits 1 is `success: true` with the exit code beside it, reported as an
error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from collector_e2e import (
    check_report,
    check_session,
    data_dir,
    result_statuses,
    run_collected,
    tool_names,
)
from fake_llm import FakeLLMServer
from harness import AgentHome

pytestmark = pytest.mark.e2e
AGENT = "copilot"
HOOKS = {"sessionStart", "userPromptSubmitted", "preToolUse", "postToolUse", "agentStop", "sessionEnd"}


def run(env: AgentHome, server: FakeLLMServer, scenario: str) -> list[dict[str, Any]]:
    entries = run_collected(AGENT, env, server, scenario)
    status = json.loads((data_dir(env) / "state" / "status.json").read_text())
    assert status["sources"]["copilot:events"]["records"] > 0 and status["sources"]["copilot:hooks"]["records"] > 0
    hooks = {e["agent.hook_event_name"] for e in entries if e["event.name"] == "session.status"}
    assert hooks <= HOOKS | {"postToolUseFailure", "permissionRequest"} and "userPromptSubmitted" in hooks
    return entries


def statuses(entries: list[dict[str, Any]]) -> list[str]:
    return [e["session.status"] for e in sorted(entries, key=lambda e: e["time_unix_nano"])
            if e["event.name"] == "session.status"]


def test_tool_then_answer(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "tool_then_answer")
    pairs = check_session(entries, fake_llm, turns=1, sources=("transcript",))
    check_report(agent_home, fake_llm)
    assert result_statuses(pairs) == ["success"]
    assert tool_names(entries) == ["bash"]
    responses = {e["gen_ai.response.id"] for e in entries if e["event.name"] == "llm.response"}
    assert responses == {r["response_id"] for r in fake_llm.responses}, "the provider's response ids"
    assert [e["session.reason"] for e in entries if e["event.name"] == "session.end"] == ["routine"]
    assert statuses(entries)[-1] == "closed" and "running" in statuses(entries)


def test_two_turns_resumed_in_a_new_process(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    entries = run(agent_home, fake_llm, "two_turns_resume")
    pairs = check_session(entries, fake_llm, turns=2, sources=("transcript",))
    assert result_statuses(pairs) == ["success", "success"]
    assert tool_names(entries) == ["bash", "create"]
    starts = sorted(e["session.source"] for e in entries if e["event.name"] == "session.start")
    assert starts == ["resume", "startup"]
    assert len([e for e in entries if e["event.name"] == "session.end"]) == 2
    seen = statuses(entries)
    assert seen[-1] == "closed" and "running" in seen[seen.index("closed"):]


def test_failing_command(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "failing_command")
    pairs = check_session(entries, fake_llm, turns=1, sources=("transcript",))
    assert result_statuses(pairs) == ["error"]  # Copilot: success true, exit code 1 beside it
    result = next(e for e in entries if e["event.name"] == "tool.result")
    assert result["error.type"] == "exit_code" and result["process.exit.code"] == 1
    assert result["error.message.length"] > 0 and "error.message" not in result  # content capture is off


def test_subagent(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    """The model calls `task`; the sub-agent runs `echo from-helper`; its calls are linked to that call."""
    entries = run(agent_home, fake_llm, "subagent")
    pairs = check_session(entries, fake_llm, turns=1, sources=("transcript",))
    check_report(agent_home, fake_llm)
    assert result_statuses(pairs) == ["success", "success"]
    assert tool_names(entries) == ["bash", "task"]
    (task,) = [e for e in entries if e["event.name"] == "tool.call" and e["gen_ai.tool.name"] == "task"]
    inside = [e for e in entries if e.get("gen_ai.agent.scope") == "subagent"]
    assert sorted(e["event.name"] for e in inside) == [
        "llm.response", "llm.response", "subagent.end", "subagent.start", "tool.call", "tool.result"]
    assert {e["gen_ai.subagent.parent_tool_call.id"] for e in inside} == {task["gen_ai.tool.call.id"]}
    (agent_id,) = {e["gen_ai.agent.id"] for e in inside}
    served = {r["response_id"] for r in fake_llm.responses}
    responses = {e["gen_ai.response.id"] for e in entries if e["event.name"] == "llm.response"}
    assert len(served) == 4 and responses == served, "the sub-agent's two calls and the session's two"
    spool = [json.loads(line) for path in (data_dir(agent_home) / "spool").rglob("*.jsonl")
             for line in path.read_text().splitlines()]
    assert {"subagentStart", "subagentStop"} <= {s["event"] for s in spool}, "Copilot's sub-agent hooks fired"
    assert any(s["payload"].get("sessionId") == agent_id for s in spool), "its hooks name the sub-agent"
    assert statuses(entries) == ["idle", "running", "ready_for_review", "closed"]
    assert {e["gen_ai.session.id"] for e in entries if e["event.name"] == "session.status"} == {
        task["gen_ai.session.id"]}, "no status of its own for the sub-agent"
