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
    check_calls,
    check_exit_code_failure,
    check_report,
    check_resumed,
    check_sources_read,
    data_dir,
    end_reasons,
    run_collected,
    statuses_of,
)
from fake_llm import FakeLLMServer
from harness import AgentHome

pytestmark = pytest.mark.e2e
AGENT = "copilot"
HOOKS = {"sessionStart", "userPromptSubmitted", "preToolUse", "postToolUse", "agentStop", "sessionEnd"}


def run(env: AgentHome, server: FakeLLMServer, scenario: str) -> list[dict[str, Any]]:
    entries = run_collected(AGENT, env, server, scenario)
    check_sources_read(env, "copilot:events", "copilot:hooks")
    hooks = {e["agent.hook_event_name"] for e in entries if e["event.name"] == "session.status"}
    assert hooks <= HOOKS | {"postToolUseFailure", "permissionRequest"} and "userPromptSubmitted" in hooks
    return entries


def response_ids(entries: list[dict[str, Any]]) -> set[str]:
    return {e["gen_ai.response.id"] for e in entries if e["event.name"] == "llm.response"}


def test_tool_then_answer(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "tool_then_answer")
    check_calls(entries, fake_llm, 1, ["success"], ["bash"], sources=("transcript",))
    check_report(agent_home, fake_llm)
    assert response_ids(entries) == {r["response_id"] for r in fake_llm.responses}, "the provider's response ids"
    assert end_reasons(entries) == ["routine"]
    assert statuses_of(entries)[-1] == "closed" and "running" in statuses_of(entries)


def test_two_turns_resumed_in_a_new_process(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    entries = run(agent_home, fake_llm, "two_turns_resume")
    check_calls(entries, fake_llm, 2, ["success", "success"], ["bash", "create"], sources=("transcript",))
    check_resumed(entries, starts=["startup", "resume"], ends=["routine", "routine"])


def test_failing_command(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "failing_command")
    # Copilot: success true, exit code 1 beside it
    check_calls(entries, fake_llm, 1, ["error"], ["bash"], sources=("transcript",))
    check_exit_code_failure(entries)


def test_subagent(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    """The model calls `task`; the sub-agent runs `echo from-helper`; its calls are linked to that call."""
    entries = run(agent_home, fake_llm, "subagent")
    check_calls(entries, fake_llm, 1, ["success", "success"], ["bash", "task"], sources=("transcript",))
    check_report(agent_home, fake_llm)
    (task,) = [e for e in entries if e["event.name"] == "tool.call" and e["gen_ai.tool.name"] == "task"]
    inside = [e for e in entries if e.get("gen_ai.agent.scope") == "subagent"]
    assert sorted(e["event.name"] for e in inside) == [
        "llm.response", "llm.response", "subagent.end", "subagent.start", "tool.call", "tool.result"]
    assert {e["gen_ai.subagent.parent_tool_call.id"] for e in inside} == {task["gen_ai.tool.call.id"]}
    (agent_id,) = {e["gen_ai.agent.id"] for e in inside}
    served = {r["response_id"] for r in fake_llm.responses}
    assert len(served) == 4 and response_ids(entries) == served, "the sub-agent's two calls and the session's two"
    spool = [json.loads(line) for path in (data_dir(agent_home) / "spool").rglob("*.jsonl")
             for line in path.read_text().splitlines()]
    assert {"subagentStart", "subagentStop"} <= {s["event"] for s in spool}, "Copilot's sub-agent hooks fired"
    assert any(s["payload"].get("sessionId") == agent_id for s in spool), "its hooks name the sub-agent"
    assert statuses_of(entries) == ["idle", "running", "ready_for_review", "closed"]
    assert {e["gen_ai.session.id"] for e in entries if e["event.name"] == "session.status"} == {
        task["gen_ai.session.id"]}, "no status of its own for the sub-agent"
