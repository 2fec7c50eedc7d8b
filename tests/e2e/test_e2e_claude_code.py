"""Real Claude Code 2.1.328 (from npm) against the fake Anthropic server, with the collector installed by
`agent-collector install` into a throwaway HOME: three scenarios, every acceptance fact checked."""

from __future__ import annotations

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
AGENT = "claude-code"


def collector(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_COLLECTOR_")}
    env["HOME"] = str(home)
    env["AGENT_COLLECTOR_HOME"] = str(home)
    result = subprocess.run([sys.executable, "-m", "collector", *args], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=180, check=False)
    assert result.returncode == 0, f"agent-collector {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result


def run(env: AgentHome, server: FakeLLMServer, scenario: str) -> list[dict[str, Any]]:
    write_agent_config(AGENT, env.home, env.workdir, server)
    collector(env.home, "install", "--agent", AGENT)
    results = run_scenario(AGENT, scenario, env.home, env.workdir, server, log_dir=env.root)
    assert all(r.returncode == 0 for r in results), describe(results)
    collector(env.home, "collect", "--once", "-q")
    return read_output(env.home / ".local" / "share" / "agent-collector" / "output")


def check_common(entries: list[dict[str, Any]], server: FakeLLMServer, turns: int) -> dict[str, Any]:
    assert_schema_valid(entries)
    assert_no_duplicates(entries)
    sessions = {e["gen_ai.session.id"] for e in entries if "gen_ai.session.id" in e}
    assert len(sessions) == 1, sessions
    prompts = [e for e in entries if e["event.name"] == "user.prompt"]
    assert len(prompts) == turns
    truth = truth_from_lines(server.responses)
    assert sum(truth.values()) >= 2 * turns, "the server answered every model call"
    assert entry_tokens(entries) == truth, "every model call with exactly the server's token numbers"
    pairs = tool_pairs(entries)
    assert pairs and all(calls == 1 and results == 1 for calls, results, _ in pairs.values()), pairs
    assert all(e.get("gen_ai.turn.id") in {p["gen_ai.turn.id"] for p in prompts}
               for e in entries if e["event.name"] in ("llm.response", "tool.call", "tool.result"))
    return pairs


def test_tool_then_answer(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "tool_then_answer")
    pairs = check_common(entries, fake_llm, turns=1)
    assert [status for _, _, status in pairs.values()] == ["success"]
    assert {e.get("gen_ai.tool.name") for e in entries if e["event.name"] == "tool.call"} == {"Bash"}
    kinds = Counter(e["source.kind"] for e in entries if e["event.name"] != "session.status")
    assert kinds["hook"] and kinds["transcript"], "both the hooks and the transcript were read"


def test_two_turns_resumed_in_a_new_process(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    entries = run(agent_home, fake_llm, "two_turns_resume")
    pairs = check_common(entries, fake_llm, turns=2)
    assert sorted(status for _, _, status in pairs.values()) == ["success", "success"]
    starts = sorted(e.get("session.source") for e in entries if e["event.name"] == "session.start")
    assert starts == ["resume", "startup"]


def test_failing_command(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "failing_command")
    pairs = check_common(entries, fake_llm, turns=1)
    assert [status for _, _, status in pairs.values()] == ["error"]
    result = next(e for e in entries if e["event.name"] == "tool.result")
    assert result["error.type"] == "tool_error" and result["error.message.length"] > 0
