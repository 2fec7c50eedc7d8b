"""Real Qwen Code 0.24.4 (from npm) against the fake Chat Completions server, with the collector installed
by `agent-collector install` (hooks in ~/.qwen/settings.json) into a throwaway HOME: three scenarios, every
acceptance fact checked. UserPromptSubmit fires twice per turn; one prompt is one turn. No SessionEnd in
-p mode, and none is invented."""

from __future__ import annotations

from pathlib import Path

import pytest
from collector_e2e import (
    check_report,
    check_session,
    result_statuses,
    run_collected,
    starts_of,
    statuses_of,
    tool_names,
)
from fake_llm import FakeLLMServer
from harness import AgentHome

pytestmark = pytest.mark.e2e
AGENT = "qwen-code"


def test_tool_then_answer(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run_collected(AGENT, agent_home, fake_llm, "tool_then_answer")
    pairs = check_session(entries, fake_llm, turns=1)
    check_report(agent_home, fake_llm)
    assert result_statuses(pairs) == ["success"]
    assert tool_names(entries) == ["run_shell_command"]
    assert statuses_of(entries) == ["idle", "running", "ready_for_review"]  # no SessionEnd in -p mode


def test_two_turns_resumed_in_a_new_process(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    entries = run_collected(AGENT, agent_home, fake_llm, "two_turns_resume")
    pairs = check_session(entries, fake_llm, turns=2)  # UserPromptSubmit fires twice a turn: one prompt each
    assert result_statuses(pairs) == ["success", "success"]
    assert tool_names(entries) == ["run_shell_command", "write_file"]
    assert starts_of(entries) == ["resume", "startup"]
    assert not [e for e in entries if e["event.name"] == "session.end"]


def test_failing_command(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run_collected(AGENT, agent_home, fake_llm, "failing_command")
    pairs = check_session(entries, fake_llm, turns=1)
    assert result_statuses(pairs) == ["error"]
    result = next(e for e in entries if e["event.name"] == "tool.result")
    assert result["error.type"] in ("tool_error", "exit_code")
    assert result["error.message.length"] > 0 and "error.message" not in result  # content capture is off
