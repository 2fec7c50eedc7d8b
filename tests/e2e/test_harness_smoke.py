"""Smoke tests proving the harness drives each real agent CLI offline (no collector involved)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fake_llm import FakeLLMServer, ToolResult
from harness import AGENTS, AgentHome, describe, run_scenario, session_files, write_agent_config

pytestmark = pytest.mark.e2e

SHELL_TOOL = {
    "claude-code": "Bash",
    "codex": "exec_command",
    "gemini-cli": "run_shell_command",
    "qwen-code": "run_shell_command",
    "opencode": "bash",
    "kilo-code": "bash",
    "copilot": "bash",
    "pi": "bash",
    "cline": "run_commands",
}
WRITE_TOOL = {
    "claude-code": "Write",
    "codex": "apply_patch",
    "gemini-cli": "write_file",
    "qwen-code": "write_file",
    "opencode": "write",
    "kilo-code": "write",
    "copilot": "create",
    "pi": "write",
    "cline": "editor",
}
# How each agent reports `cat <missing>` (exit 1) back to the model.
FAILURE_SIGNAL = {
    "claude-code": re.compile(r"^Exit code 1\b"),  # and is_error: true
    "codex": re.compile(r"Process exited with code 1\b"),
    "gemini-cli": re.compile(r"Exit Code: 1\b"),
    "qwen-code": re.compile(r"Exit Code: 1\b"),
    "opencode": re.compile(r"No such file or directory"),  # bare output; the exit code is only in metadata
    "kilo-code": re.compile(r"No such file or directory"),  # as OpenCode
    "copilot": re.compile(r"exit code 1\b"),
    "pi": re.compile(r"Command exited with code 1\b"),
    "cline": re.compile(r"Command exited with code 1\b"),
}
# `echo hi`'s output as the agent hands it to the model: bare text, or (Cline) a JSON list of
# {"query", "result", "success"} where the output is the string "hi\n".
PLAIN_ECHO = re.compile(r"(^|\s)hi(\s|$)")
ECHO_OUTPUT = {"cline": re.compile(r'"result":"hi\\n"')}
USAGE_CACHE_FIELD = {
    "anthropic": "cache_read_input_tokens",
    "responses": "input_tokens_details",
    "chat": "prompt_tokens_details",
    "gemini": "cachedContentTokenCount",
}


def _run(agent: str, scenario: str, env: AgentHome, server: FakeLLMServer) -> None:
    write_agent_config(agent, env.home, env.workdir, server)
    results = run_scenario(agent, scenario, env.home, env.workdir, server, log_dir=env.root)
    details = describe(results)
    assert [r.returncode for r in results] == [0] * len(results), details
    assert not server.errors, "fake server failed:\n" + "\n".join(server.errors)


def _shell_calls(server: FakeLLMServer, agent: str) -> list[list[object]]:
    return [d for d in server.decisions() if d[0] == "tool" and d[1] == SHELL_TOOL[agent]]


def _assert_usage_recorded(server: FakeLLMServer) -> None:
    assert len(server.responses) == len(server.model_calls)
    ids = [r["response_id"] for r in server.responses]
    assert len(set(ids)) == len(ids)
    for resp in server.responses:
        assert resp["kind"] == "response_usage" and USAGE_CACHE_FIELD[resp["api"]] in resp["usage"], resp


@pytest.mark.parametrize("agent", AGENTS)
def test_tool_then_answer(
    agent: str, e2e_agents_bin: Path, fake_llm: FakeLLMServer, agent_home: AgentHome
) -> None:
    _run(agent, "tool_then_answer", agent_home, fake_llm)

    assert len(fake_llm.model_calls) >= 2
    assert _shell_calls(fake_llm, agent), fake_llm.decisions()
    final = fake_llm.decisions()[-1]
    assert final[0] == "text" and "hi" in str(final[1]), final
    assert any(ECHO_OUTPUT.get(agent, PLAIN_ECHO).search(r.text) for r in fake_llm.tool_results())
    _assert_usage_recorded(fake_llm)
    assert session_files(agent, agent_home.home, agent_home.workdir), (
        f"no session files under {agent_home.home}"
    )


@pytest.mark.parametrize("agent", AGENTS)
def test_failing_command(
    agent: str, e2e_agents_bin: Path, fake_llm: FakeLLMServer, agent_home: AgentHome
) -> None:
    _run(agent, "failing_command", agent_home, fake_llm)

    assert _shell_calls(fake_llm, agent), fake_llm.decisions()
    failures: list[ToolResult] = [r for r in fake_llm.tool_results() if FAILURE_SIGNAL[agent].search(r.text)]
    assert failures, [r.text for r in fake_llm.tool_results()]
    if agent == "claude-code":
        assert failures[0].is_error is True
    assert session_files(agent, agent_home.home, agent_home.workdir)


# Cline resumes only in its interactive terminal UI: test_e2e_cline.py drives that resume on a pty.
@pytest.mark.parametrize("agent", [agent for agent in AGENTS if agent != "cline"])
def test_two_turns_resume(
    agent: str, e2e_agents_bin: Path, fake_llm: FakeLLMServer, agent_home: AgentHome
) -> None:
    _run(agent, "two_turns_resume", agent_home, fake_llm)

    notes = agent_home.workdir / "notes.md"
    assert notes.is_file() and "fake model" in notes.read_text()
    tools = [d[1] for d in fake_llm.decisions() if d[0] == "tool"]
    assert tools == [WRITE_TOOL[agent], SHELL_TOOL[agent]], fake_llm.decisions()
    assert fake_llm.decisions()[-1][0] == "text"
    assert "notes.md" in fake_llm.tool_results()[-1].text  # `ls -la` in the resumed turn sees the file
    _assert_usage_recorded(fake_llm)
    files = session_files(agent, agent_home.home, agent_home.workdir)
    assert files
    if agent != "gemini-cli":  # Gemini may leave a stub file when the resume starts in a new minute
        assert len(files) == 1, files  # the resumed turn went to the same session
