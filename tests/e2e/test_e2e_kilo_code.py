"""Real Kilo Code CLI 7.7.7 (`@kilocode/cli`, an OpenCode fork) against the fake Chat Completions server,
with the collector installed by `agent-collector install` (OpenCode's spool plugin, deployed by
configuration into ~/.config/kilo/plugin) into a throwaway HOME: three scenarios, every acceptance fact
checked. The plugin's events and the SQLite store (~/.local/share/kilo/kilo.db, OpenCode's tables) describe
the same things and are read by OpenCode's parser. Unlike OpenCode, `kilo run` makes no session-title
model call, so every call the server answered carries its exact numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from collector_e2e import (
    NO_NPM_RETRY,
    check_calls,
    check_exit_code_failure,
    check_resumed,
    check_tool_then_answer,
    end_reasons,
    run_read,
)
from fake_llm import FakeLLMServer
from harness import AgentHome

pytestmark = pytest.mark.e2e
AGENT = "kilo-code"


def run(env: AgentHome, server: FakeLLMServer, scenario: str) -> list[dict[str, Any]]:
    entries = run_read(AGENT, env, server, scenario, "kilo-code:db", extra_env=NO_NPM_RETRY)  # after the plugin
    assert {e["agent.name"] for e in entries if "agent.name" in e} <= {AGENT}
    return entries


def test_tool_then_answer(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "tool_then_answer")
    check_tool_then_answer(agent_home, entries, fake_llm, ["bash"], sources=("hook",))
    assert end_reasons(entries) == ["exit"]


def test_two_turns_resumed_in_a_new_process(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    entries = run(agent_home, fake_llm, "two_turns_resume")
    check_calls(entries, fake_llm, 2, ["success", "success"], ["bash", "write"], sources=("hook",))
    check_resumed(entries, starts=["startup"], ends=["exit", "exit"])  # `kilo run --continue` announces nothing


def test_failing_command(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "failing_command")
    check_calls(entries, fake_llm, 1, ["error"], ["bash"], sources=("hook",))
    check_exit_code_failure(entries)
