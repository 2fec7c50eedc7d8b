"""Real Codex CLI 0.171.0 (from npm) against the fake Responses server, with the collector installed by
`agent-collector install` (hooks.json + notify) into a throwaway HOME: three scenarios, every acceptance
fact checked. Hooks run because the harness passes --dangerously-bypass-hook-trust."""

from __future__ import annotations

from pathlib import Path

import pytest
from collector_e2e import check_calls, check_tool_then_answer, run_collected, starts_of, statuses_of
from fake_llm import FakeLLMServer
from harness import AgentHome

pytestmark = pytest.mark.e2e
AGENT = "codex"


def test_tool_then_answer(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run_collected(AGENT, agent_home, fake_llm, "tool_then_answer")
    check_tool_then_answer(agent_home, entries, fake_llm, ["exec_command"],
                           ["idle", "running", "ready_for_review", "closed"])
    responses = sorted(e["gen_ai.response.id"] for e in entries if e["event.name"] == "llm.response")
    assert responses == sorted(r["response_id"] for r in fake_llm.responses), "each response once, by its id"


def test_two_turns_resumed_in_a_new_process(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    entries = run_collected(AGENT, agent_home, fake_llm, "two_turns_resume")
    check_calls(entries, fake_llm, 2, ["success", "success"], ["apply_patch", "exec_command"])
    assert starts_of(entries) == ["resume", "startup"]
    assert sum(e["event.name"] == "session.end" for e in entries) == 2
    assert statuses_of(entries)[-1] == "closed"


def test_failing_command(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run_collected(AGENT, agent_home, fake_llm, "failing_command")
    check_calls(entries, fake_llm, 1, ["error"], None)  # Codex fires no failure hook: the rollout's exit code says it
    result = next(e for e in entries if e["event.name"] == "tool.result")
    assert result["error.type"] == "exit_code" and result["process.exit.code"] == 1
    assert result["error.message.length"] > 0 and "error.message" not in result  # content capture is off
