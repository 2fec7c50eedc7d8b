"""Real Claude Code 2.1.332 (from npm) against the fake Anthropic server, with the collector installed by
`agent-collector install` into a throwaway HOME (the default integration: the drop-in plugin posting to the
daemon, which runs during the session as it would as a service): three scenarios, every acceptance fact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from collector_e2e import check_calls, check_tool_then_answer, run_collected, starts_of
from fake_llm import FakeLLMServer
from harness import AgentHome

pytestmark = pytest.mark.e2e
AGENT = "claude-code"


def run(env: AgentHome, server: FakeLLMServer, scenario: str) -> list[dict[str, Any]]:
    entries = run_collected(AGENT, env, server, scenario, daemon=True)
    assert (env.home / ".claude" / "skills" / "agent-collector" / ".claude-plugin" / "plugin.json").exists()
    posted = [e for e in entries if e.get("agent.hook_event_name") in ("PostToolUse", "PostToolUseFailure")]
    assert posted and all(e["duration_ms"] >= 0 for e in posted), "http hooks reached the daemon"
    return entries


def test_tool_then_answer(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "tool_then_answer")
    check_tool_then_answer(agent_home, entries, fake_llm, ["Bash"], ["idle", "running", "ready_for_review", "closed"])


def test_two_turns_resumed_in_a_new_process(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    entries = run(agent_home, fake_llm, "two_turns_resume")
    check_calls(entries, fake_llm, 2, ["success", "success"], ["Bash", "Write"])
    assert starts_of(entries) == ["resume", "startup"]


def test_failing_command(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "failing_command")
    check_calls(entries, fake_llm, 1, ["error"], None)
    result = next(e for e in entries if e["event.name"] == "tool.result")
    assert result["error.type"] == "tool_error" and result["error.message.length"] > 0
