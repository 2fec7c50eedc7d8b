"""Real pi 0.73.1 (`@mariozechner/pi-coding-agent` from npm) against the fake Chat Completions server, with
the collector installed by `agent-collector install` (the spool extension in ~/.pi/agent/extensions) into
a throwaway HOME: three scenarios, every acceptance fact checked. The extension's lines and pi's session
file describe the same prompts, model calls and tools with the same ids; the file alone is enough for a
backfill, and `uninstall` leaves pi's own files byte-identical."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from collector_e2e import (
    check_calls,
    check_exit_code_failure,
    check_resumed,
    check_tool_then_answer,
    collect_files_alone,
    collector,
    end_reasons,
    facts,
    run_read,
)
from fake_llm import FakeLLMServer
from harness import AgentHome, session_files, write_agent_config

pytestmark = pytest.mark.e2e
AGENT = "pi"
EXTENSION = Path(".pi/agent/extensions/agent-collector.ts")
PI_FILES = (".pi/agent/models.json", ".pi/agent/settings.json")
HOOK_ONLY = {"session.end", "session.status"}  # the file knows no process ends, and statuses come from hooks


def run(env: AgentHome, server: FakeLLMServer, scenario: str) -> list[dict[str, Any]]:
    return run_read(AGENT, env, server, scenario, "pi:sessions")  # after the extension's lines (read first)


def test_tool_then_answer(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer,
                          tmp_path: Path) -> None:
    write_agent_config(AGENT, agent_home.home, agent_home.workdir, fake_llm)
    before = {rel: (agent_home.home / rel).read_bytes() for rel in PI_FILES}
    entries = run(agent_home, fake_llm, "tool_then_answer")
    session = check_tool_then_answer(agent_home, entries, fake_llm, ["bash"],
                                     ["idle", "running", "ready_for_review", "closed"], sources=("hook",))
    assert session["rows"][0]["agent_cost_usd"] is not None, "pi's own cost figure is shown next to ours"
    assert end_reasons(entries) == ["exit"]
    hooked = {e["event.name"] for e in entries if e.get("source.kind") == "hook"}
    assert {"user.prompt", "llm.response", "tool.call", "tool.result", "session.start"} <= hooked

    alone = collect_files_alone(session_files(AGENT, agent_home.home, agent_home.workdir), agent_home.home,
                                tmp_path / "files-alone")
    assert facts(alone, HOOK_ONLY) == facts(entries, HOOK_ONLY), "the file alone: the same facts, the same ids"

    collector(agent_home.home, "uninstall", "--agent", AGENT)
    assert not (agent_home.home / EXTENSION).exists()
    assert {rel: (agent_home.home / rel).read_bytes() for rel in PI_FILES} == before


def test_two_turns_resumed_in_a_new_process(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    entries = run(agent_home, fake_llm, "two_turns_resume")
    check_calls(entries, fake_llm, 2, ["success", "success"], ["bash", "write"], sources=("hook",))
    assert len(session_files(AGENT, agent_home.home, agent_home.workdir)) == 1, "--continue appends"
    # only the extension knows the second process
    check_resumed(entries, starts=["startup", "resume"], ends=["exit", "exit"])


def test_failing_command(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "failing_command")
    check_calls(entries, fake_llm, 1, ["error"], ["bash"], sources=("hook",))
    check_exit_code_failure(entries)
