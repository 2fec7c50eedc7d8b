"""Real Kilo Code CLI 7.7.7 (`@kilocode/cli`, an OpenCode fork) against the fake Chat Completions server,
with the collector installed by `agent-collector install` (OpenCode's spool plugin, deployed by
configuration into ~/.config/kilo/plugin) into a throwaway HOME: three scenarios, every acceptance fact
checked. The plugin's events and the SQLite store (~/.local/share/kilo/kilo.db, OpenCode's tables) describe
the same things and are read by OpenCode's parser. Unlike OpenCode, `kilo run` makes no session-title
model call, so every call the server answered carries its exact numbers."""

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
AGENT = "kilo-code"
# Kilo, like OpenCode, runs a background `npm install` of plugin dependencies against the dead registry.
NO_NPM_RETRY = {"npm_config_fetch_retries": "0"}


def run(env: AgentHome, server: FakeLLMServer, scenario: str) -> list[dict[str, Any]]:
    entries = run_collected(AGENT, env, server, scenario, extra_env=NO_NPM_RETRY)
    status = json.loads((data_dir(env) / "state" / "status.json").read_text())
    # The plugin's events came first; the database told the same facts again and they were dropped.
    assert status["sources"]["kilo-code:db"]["records"] > 0 and status["pipeline"]["duplicates"] > 0
    assert {e["agent.name"] for e in entries if "agent.name" in e} <= {AGENT}
    return entries


def test_tool_then_answer(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "tool_then_answer")
    pairs = check_session(entries, fake_llm, turns=1, sources=("hook",))
    check_report(agent_home, fake_llm)
    assert result_statuses(pairs) == ["success"]
    assert tool_names(entries) == ["bash"]
    assert [e["session.reason"] for e in entries if e["event.name"] == "session.end"] == ["exit"]


def test_two_turns_resumed_in_a_new_process(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    entries = run(agent_home, fake_llm, "two_turns_resume")
    pairs = check_session(entries, fake_llm, turns=2, sources=("hook",))
    assert result_statuses(pairs) == ["success", "success"]
    assert tool_names(entries) == ["bash", "write"]
    assert [e["event.name"] for e in entries].count("session.start") == 1
    assert [e["session.reason"] for e in entries if e["event.name"] == "session.end"] == ["exit", "exit"]
    statuses = [e["session.status"] for e in sorted(entries, key=lambda e: e["time_unix_nano"])
                if e["event.name"] == "session.status"]
    assert statuses[-1] == "closed" and "running" in statuses[statuses.index("closed"):]


def test_failing_command(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "failing_command")
    pairs = check_session(entries, fake_llm, turns=1, sources=("hook",))
    assert result_statuses(pairs) == ["error"]
    result = next(e for e in entries if e["event.name"] == "tool.result")
    assert result["error.type"] == "exit_code" and result["process.exit.code"] == 1
    assert result["error.message.length"] > 0 and "error.message" not in result  # content capture is off
