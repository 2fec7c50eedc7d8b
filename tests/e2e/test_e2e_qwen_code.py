"""Real Qwen Code 0.24.4 (from npm) against the fake Chat Completions server, with the collector installed
by `agent-collector install` (hooks in ~/.qwen/settings.json) into a throwaway HOME: three scenarios, every
acceptance fact checked. UserPromptSubmit fires twice per turn; one prompt is one turn. No SessionEnd in
-p mode, and none is invented."""

from __future__ import annotations

from pathlib import Path

import pytest
from collector_e2e import check_calls, check_tool_then_answer, run_collected, starts_of
from fake_llm import FakeLLMServer
from harness import AgentHome

pytestmark = pytest.mark.e2e
AGENT = "qwen-code"


def test_tool_then_answer(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run_collected(AGENT, agent_home, fake_llm, "tool_then_answer")
    check_tool_then_answer(agent_home, entries, fake_llm, ["run_shell_command"],
                           ["idle", "running", "ready_for_review"])  # no SessionEnd in -p mode


def test_two_turns_resumed_in_a_new_process(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    entries = run_collected(AGENT, agent_home, fake_llm, "two_turns_resume")
    # UserPromptSubmit fires twice a turn: one prompt each
    check_calls(entries, fake_llm, 2, ["success", "success"], ["run_shell_command", "write_file"])
    assert starts_of(entries) == ["resume", "startup"]
    assert not [e for e in entries if e["event.name"] == "session.end"]


def test_failing_command(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run_collected(AGENT, agent_home, fake_llm, "failing_command")
    check_calls(entries, fake_llm, 1, ["error"], None)
    result = next(e for e in entries if e["event.name"] == "tool.result")
    assert result["error.type"] in ("tool_error", "exit_code")
    assert result["error.message.length"] > 0 and "error.message" not in result  # content capture is off
