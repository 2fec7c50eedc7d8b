"""Real pi 0.73.1 (`@mariozechner/pi-coding-agent` from npm) against the fake Chat Completions server, with
the collector installed by `agent-collector install` (the spool extension in ~/.pi/agent/extensions) into
a throwaway HOME: three scenarios, every acceptance fact checked. The extension's lines and pi's session
file describe the same prompts, model calls and tools with the same ids; the file alone is enough for a
backfill, and `uninstall` leaves pi's own files byte-identical."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from collector_e2e import (
    check_report,
    check_session,
    collector,
    data_dir,
    result_statuses,
    run_collected,
    starts_of,
    statuses_of,
    tool_names,
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
    status = json.loads((data_dir(env) / "state" / "status.json").read_text())
    # The extension's lines came first (the spool is read first); the session file told the same facts
    # again and they were dropped.
    assert status["sources"]["pi:sessions"]["records"] > 0 and status["pipeline"]["duplicates"] > 0
    return entries


def check(entries: list[dict[str, Any]], server: FakeLLMServer, turns: int) -> dict[str, Any]:
    return check_session(entries, server, turns, sources=("hook",))


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
    pairs = check(entries, fake_llm, turns=1)
    session = check_report(agent_home, fake_llm)
    assert session["rows"][0]["agent_cost_usd"] is not None, "pi's own cost figure is shown next to ours"
    assert result_statuses(pairs) == ["success"]
    assert tool_names(entries) == ["bash"]
    assert statuses_of(entries) == ["idle", "running", "ready_for_review", "closed"]
    assert [e["session.reason"] for e in entries if e["event.name"] == "session.end"] == ["exit"]
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
    pairs = check(entries, fake_llm, turns=2)
    assert result_statuses(pairs) == ["success", "success"]
    assert tool_names(entries) == ["bash", "write"]
    assert len(session_files(AGENT, agent_home.home, agent_home.workdir)) == 1, "--continue appends"
    assert starts_of(entries) == ["resume", "startup"]  # only the extension knows the second process
    assert [e["session.reason"] for e in entries if e["event.name"] == "session.end"] == ["exit", "exit"]
    statuses = statuses_of(entries)
    assert statuses[-1] == "closed" and "running" in statuses[statuses.index("closed"):]


def test_failing_command(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "failing_command")
    pairs = check(entries, fake_llm, turns=1)
    assert result_statuses(pairs) == ["error"]
    results = [e for e in entries if e["event.name"] == "tool.result"]
    assert [(r["error.type"], r["process.exit.code"]) for r in results] == [("exit_code", 1)]
    assert results[0]["error.message.length"] > 0 and "error.message" not in results[0]  # capture is off
