"""Real Gemini CLI 0.61.0 (from npm) against the fake Gemini server, with the collector installed by
`agent-collector install` (hooks in ~/.gemini/settings.json) into a throwaway HOME: three scenarios, every
acceptance fact checked. The chat log gives prompts, model calls and tools; hooks the session's start and
end; a shell exit of 1, which Gemini records as a success, must come out as an error."""

from __future__ import annotations

from pathlib import Path

import pytest
from collector_e2e import check_calls, check_exit_code_failure, check_tool_then_answer, run_collected, starts_of
from fake_llm import FakeLLMServer
from harness import AgentHome

pytestmark = pytest.mark.e2e
AGENT = "gemini-cli"


def test_tool_then_answer(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run_collected(AGENT, agent_home, fake_llm, "tool_then_answer")
    check_tool_then_answer(agent_home, entries, fake_llm, ["run_shell_command"],
                           ["idle", "running", "ready_for_review", "closed"])
    assert not [e for e in entries if e["event.name"] == "compaction"], "PreCompress is not a compaction"


def test_two_turns_resumed_in_a_new_process(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    entries = run_collected(AGENT, agent_home, fake_llm, "two_turns_resume")
    check_calls(entries, fake_llm, 2, ["success", "success"], ["run_shell_command", "write_file"])
    assert starts_of(entries) == ["resume", "startup"]
    assert sum(e["event.name"] == "session.end" for e in entries) == 2


def test_failing_command(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run_collected(AGENT, agent_home, fake_llm, "failing_command")
    check_calls(entries, fake_llm, 1, ["error"], None)
    check_exit_code_failure(entries)
    recorded = [line for path in agent_home.home.glob(".gemini/tmp/*/chats/*.jsonl")
                for line in path.read_text().splitlines() if '"toolCalls"' in line]
    assert recorded and all('"status":"success"' in line for line in recorded)  # what Gemini itself says
