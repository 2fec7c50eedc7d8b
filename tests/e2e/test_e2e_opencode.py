"""Real OpenCode 1.18.33 (from npm) against the fake Chat Completions server, with the collector installed
by `agent-collector install` (the spool plugin in ~/.config/opencode/plugin) into a throwaway HOME: three
scenarios, every acceptance fact checked. The plugin's events and the SQLite store describe the same
things. One model call cannot be accounted: OpenCode stores the usage of its session-title call nowhere,
so every call but that one must carry the server's exact numbers, and the one missing must be it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLMServer
from harness import AgentHome, describe, run_scenario, write_agent_config
from support import (
    ROOT,
    assert_no_duplicates,
    assert_schema_valid,
    entry_tokens,
    read_output,
    tool_pairs,
    truth_from_lines,
)

pytestmark = pytest.mark.e2e
AGENT = "opencode"
# OpenCode's background `npm install` of plugin deps goes to the harness's dead registry port; npm's default
# retries (10 s, then 60 s) would hold every run for over a minute before it fails.
NO_NPM_RETRY = {"npm_config_fetch_retries": "0"}


def collector(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_COLLECTOR_", "XDG_", "CODEX_"))}
    env["HOME"] = str(home)
    env["AGENT_COLLECTOR_HOME"] = str(home)
    result = subprocess.run(
        [sys.executable, "-m", "collector", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, f"agent-collector {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result


def run(env: AgentHome, server: FakeLLMServer, scenario: str) -> list[dict[str, Any]]:
    write_agent_config(AGENT, env.home, env.workdir, server)
    collector(env.home, "install", "--agent", AGENT)
    results = run_scenario(
        AGENT, scenario, env.home, env.workdir, server, log_dir=env.root, extra_env=NO_NPM_RETRY
    )
    assert all(r.returncode == 0 for r in results), describe(results)
    collector(env.home, "collect", "--once", "-q")
    data = env.home / ".local" / "share" / "agent-collector"
    status = json.loads((data / "state" / "status.json").read_text())
    # The plugin's events came first; the database told the same facts again and they were dropped.
    assert status["sources"]["opencode:db"]["records"] > 0 and status["pipeline"]["duplicates"] > 0
    return read_output(data / "output")


def check_common(entries: list[dict[str, Any]], server: FakeLLMServer, turns: int) -> dict[str, Any]:
    assert_schema_valid(entries)
    assert_no_duplicates(entries)
    sessions = {e["gen_ai.session.id"] for e in entries if "gen_ai.session.id" in e}
    assert len(sessions) == 1, sessions
    prompts = [e for e in entries if e["event.name"] == "user.prompt"]
    assert len(prompts) == turns == len({p["gen_ai.turn.id"] for p in prompts})
    truth, got = truth_from_lines(server.responses), entry_tokens(entries)
    assert sum(truth.values()) >= 2 * turns + 1, "the server answered every model call"
    assert not got - truth, "no call with numbers the server did not send"
    assert sum((truth - got).values()) == title_calls(server) == 1, "only the title call lacks its tokens"
    pairs = tool_pairs(entries)
    assert pairs and all(calls == 1 and results == 1 for calls, results, _ in pairs.values()), pairs
    assert all(
        e.get("gen_ai.turn.id") in {p["gen_ai.turn.id"] for p in prompts}
        for e in entries
        if e["event.name"] in ("llm.response", "tool.call", "tool.result")
    )
    kinds = Counter(e["source.kind"] for e in entries if e["event.name"] != "session.status")
    assert kinds["hook"], "the plugin's spool lines were read"
    return pairs


def title_calls(server: FakeLLMServer) -> int:
    """Model calls with OpenCode's title-generator system prompt."""
    return sum(
        1
        for r in server.model_calls
        if "title generator" in str(((r.get("body") or {}).get("messages") or [{}])[0].get("content"))
    )


def tool_names(entries: list[dict[str, Any]]) -> list[str]:
    return sorted(e["gen_ai.tool.name"] for e in entries if e["event.name"] == "tool.call")


def test_tool_then_answer(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "tool_then_answer")
    pairs = check_common(entries, fake_llm, turns=1)
    assert [status for _, _, status in pairs.values()] == ["success"]
    assert tool_names(entries) == ["bash"]


def test_two_turns_resumed_in_a_new_process(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    entries = run(agent_home, fake_llm, "two_turns_resume")
    pairs = check_common(entries, fake_llm, turns=2)
    assert sorted(status for _, _, status in pairs.values()) == ["success", "success"]
    assert tool_names(entries) == ["bash", "write"]
    # `opencode run --continue` announces nothing: one start (the session row), no end in run mode
    assert [e["event.name"] for e in entries].count("session.start") == 1
    assert not [e for e in entries if e["event.name"] == "session.end"]


def test_failing_command(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "failing_command")
    pairs = check_common(entries, fake_llm, turns=1)
    assert [status for _, _, status in pairs.values()] == ["error"]
    result = next(e for e in entries if e["event.name"] == "tool.result")
    assert result["error.type"] == "exit_code" and result["process.exit.code"] == 1
    assert result["error.message.length"] > 0 and "error.message" not in result  # content capture is off
