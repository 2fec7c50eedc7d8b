"""Real Claude Code 2.1.328 (from npm) against the fake Anthropic server, with the collector installed by
`agent-collector install` into a throwaway HOME (the default integration: the drop-in plugin posting to the
daemon, which runs during the session as it would as a service): three scenarios, every acceptance fact."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
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


def collector_env(home: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_COLLECTOR_")}
    env.update(HOME=str(home), AGENT_COLLECTOR_HOME=str(home), AGENT_COLLECTOR_INGEST__PORT=str(port))
    return env


def collector(home: Path, port: int, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "collector", *args], cwd=ROOT, env=collector_env(home, port),
                            capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, f"agent-collector {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"the daemon did not listen on {port}")


def run(env: AgentHome, server: FakeLLMServer, scenario: str) -> list[dict[str, Any]]:
    port = free_port()
    write_agent_config(AGENT, env.home, env.workdir, server)
    collector(env.home, port, "install", "--agent", AGENT)
    assert (env.home / ".claude" / "skills" / "agent-collector" / ".claude-plugin" / "plugin.json").exists()
    daemon = subprocess.Popen([sys.executable, "-m", "collector", "run"], cwd=ROOT, env=collector_env(env.home, port),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_listening(port)
        results = run_scenario(AGENT, scenario, env.home, env.workdir, server, log_dir=env.root)
        assert all(r.returncode == 0 for r in results), describe(results)
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=30)
    assert daemon.returncode == 0, err.decode()[-3000:]
    collector(env.home, port, "collect", "--once", "-q")  # whatever the daemon had not read yet
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
    http = [e for e in entries if e.get("agent.hook_event_name") == "PostToolUse"]
    assert http and http[0]["duration_ms"] >= 0, "http hooks reached the daemon (tool durations come only from them)"
    statuses = [e["session.status"] for e in sorted(entries, key=lambda e: e["time_unix_nano"])
                if e["event.name"] == "session.status"]
    assert statuses == ["idle", "running", "ready_for_review", "closed"]


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
