"""Real pi 0.73.1 (`@mariozechner/pi-coding-agent` from npm) against the fake Chat Completions server, with
the collector installed by `agent-collector install` (the spool extension in ~/.pi/agent/extensions) into
a throwaway HOME: three scenarios, every acceptance fact checked. The extension's lines and pi's session
file describe the same prompts, model calls and tools with the same ids; the file alone is enough for a
backfill, and `uninstall` leaves pi's own files byte-identical."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from collector_e2e import (
    check_calls,
    check_exit_code_failure,
    check_report,
    check_resumed,
    check_sources_read,
    collector,
    end_reasons,
    run_collected,
    statuses_of,
)
from fake_llm import FakeLLMServer
from harness import AgentHome, session_files, write_agent_config
from support import read_output

pytestmark = pytest.mark.e2e
AGENT = "pi"
EXTENSION = Path(".pi/agent/extensions/agent-collector.ts")
PI_FILES = (".pi/agent/models.json", ".pi/agent/settings.json")
HOOK_ONLY = {"session.end", "session.status"}  # the file knows no process ends, and statuses come from hooks


def facts(entries: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(e["event.name"], e["event.id"]) for e in entries if e["event.name"] not in HOOK_ONLY}


def run(env: AgentHome, server: FakeLLMServer, scenario: str) -> list[dict[str, Any]]:
    entries = run_collected(AGENT, env, server, scenario)
    # The extension's lines came first (the spool is read first); the session file told the same facts
    # again and they were dropped.
    check_sources_read(env, "pi:sessions", duplicates=True)
    return entries


def collect_files_alone(env: AgentHome, tmp: Path) -> list[dict[str, Any]]:
    """pi's session files copied into a fresh HOME with no spool, collected with `collect --once`."""
    home = tmp / "files-alone"
    for path in session_files(AGENT, env.home, env.workdir):
        target = home / path.relative_to(env.home)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    collector(home, "collect", "--once", "-q")
    return read_output(home / ".local" / "share" / "agent-collector" / "output")


def test_tool_then_answer(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer,
                          tmp_path: Path) -> None:
    write_agent_config(AGENT, agent_home.home, agent_home.workdir, fake_llm)
    before = {rel: (agent_home.home / rel).read_bytes() for rel in PI_FILES}
    entries = run(agent_home, fake_llm, "tool_then_answer")
    check_calls(entries, fake_llm, 1, ["success"], ["bash"], sources=("hook",))
    session = check_report(agent_home, fake_llm)
    assert session["rows"][0]["agent_cost_usd"] is not None, "pi's own cost figure is shown next to ours"
    assert statuses_of(entries) == ["idle", "running", "ready_for_review", "closed"]
    assert end_reasons(entries) == ["exit"]
    hooked = {e["event.name"] for e in entries if e.get("source.kind") == "hook"}
    assert {"user.prompt", "llm.response", "tool.call", "tool.result", "session.start"} <= hooked

    alone = collect_files_alone(agent_home, tmp_path)
    assert facts(alone) == facts(entries), "the session file alone gives the same facts with the same ids"

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
