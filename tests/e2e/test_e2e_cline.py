"""Real Cline CLI 3.0.65 (npm `cline`, provider set by `cline auth -p openai -b <fake server>/v1`) against the
fake Chat Completions server, with the collector installed by `agent-collector install` (one hook executable
per event in ~/.cline/hooks, the hooks_dir integration) into a throwaway HOME: tool then answer, a failing
command, a file write and a sub-agent, every acceptance fact checked. Cline resumes a session only in its
interactive terminal UI (`cline --id <session>` needs a TTY): the resume test types its second prompt into
that UI on a pseudo-terminal.

The hooks give tool calls and results with Cline's tool call ids, and the live status; the messages files
(rewritten whole after every message, read element by element) give the same tool entries again (dropped as
duplicates) and the prompts and model calls with their tokens; sessions.db gives session and sub-agent
start and end. Cline leaves a background hub process running: the harness ends it, and every test checks
that nothing started under its HOME is left."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from collector_e2e import (
    check_calls,
    check_tool_then_answer,
    collect_files_alone,
    collector,
    data_dir,
    facts,
    run_collected,
    starts_of,
    statuses_of,
    tool_names,
)
from fake_llm import FakeLLMServer
from harness import (
    AgentHome,
    Scenario,
    Turn,
    lingering_pids,
    run_agent,
    run_cline_resumed,
    session_files,
    write_agent_config,
)
from support import read_output
from support.waits import free_port

pytestmark = pytest.mark.e2e
AGENT = "cline"
HOOKS_DIR = Path(".cline/hooks")
PROVIDERS = Path(".cline/data/settings/providers.json")
HOOK_ONLY = {"session.status"}
FILES = ("hook", "json_item", "sqlite")  # every input made entries
WRITE = Scenario("write_file", (Turn("Please write {workdir}/notes.md with a short note."),), "editor tool")
SUBAGENT = Scenario("subagent", (Turn("Please use a subagent to run a command and report."),), "spawn_agent")


def run(env: AgentHome, server: FakeLLMServer, scenario: str | Scenario, daemon: bool = False) -> list[dict[str, Any]]:
    entries = run_collected(AGENT, env, server, scenario, daemon=daemon)
    assert lingering_pids(AGENT, env.home) == [], "Cline's hub was ended"
    assert not _processes_under(env.home), "no process started under the test's HOME is left"
    if daemon:  # the daemon read everything; the counts below are of the last `collect --once` alone
        assert {e["event.name"] for e in entries} >= {"session.status", "tool.result", "llm.response"}
        return entries
    status = json.loads((data_dir(env) / "state" / "status.json").read_text())
    sources = status["sources"]
    assert sources["cline:hooks"]["records"] > 0 and sources["cline:messages"]["records"] > 0
    assert sources["cline:sessions"]["records"] > 0
    # The hooks came first; sessions.db told the same session start again: dropped.
    assert status["pipeline"]["duplicates"] > 0
    return entries


def _processes_under(home: Path) -> list[int]:
    want = f"HOME={home}".encode()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if want in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def files_alone(env: AgentHome, tmp: Path) -> list[dict[str, Any]]:
    """Cline's messages files and sessions.db (with its -wal/-shm) collected alone in a fresh HOME."""
    files = session_files(AGENT, env.home, env.workdir)
    files += [p for p in (env.home / ".cline/data/db").glob("sessions.db-*")]
    return collect_files_alone(files, env.home, tmp / "files-alone")


def test_tool_then_answer(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer,
                          tmp_path: Path) -> None:
    entries = run(agent_home, fake_llm, "tool_then_answer")
    check_tool_then_answer(agent_home, entries, fake_llm, ["run_commands"], sources=FILES)
    hooked = {e["event.name"] for e in entries if e.get("source.kind") == "hook"}
    assert hooked == {"session.start"}, "hooks name no prompt: the files make the rest"
    assert [e["session.reason"] for e in entries if e["event.name"] == "session.end"] == ["completed"]
    # No hook fires when `cline` exits: the session's row in sessions.db, ended, closes it.
    assert statuses_of(entries) == ["idle", "running", "ready_for_review", "closed"]

    alone = files_alone(agent_home, tmp_path)
    assert facts(alone, HOOK_ONLY) == facts(entries, HOOK_ONLY), "the files alone give the same facts with the same ids"

    providers = (agent_home.home / PROVIDERS).read_bytes()
    collector(agent_home.home, "uninstall", "--agent", AGENT)
    assert not (agent_home.home / HOOKS_DIR).exists(), "the hooks folder we created is gone"
    assert (agent_home.home / PROVIDERS).read_bytes() == providers


def test_failing_command(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    """With the daemon running, as a service would be: the hooks reach it while Cline works."""
    entries = run(agent_home, fake_llm, "failing_command", daemon=True)
    # live, the session's row may be read before the TaskStart hook lands: its start is the one kept
    check_calls(entries, fake_llm, 1, ["error"], None, sources=FILES[1:])
    hooked = {e["agent.hook_event_name"] for e in entries if e["event.name"] == "session.status"}
    assert {"TaskStart", "PreToolUse", "TaskComplete"} <= hooked, "the daemon got the hooks"
    assert statuses_of(entries) == ["idle", "running", "ready_for_review", "closed"]
    results = [e for e in entries if e["event.name"] == "tool.result"]
    assert [(r["error.type"], r["process.exit.code"]) for r in results] == [("exit_code", 1)]
    assert results[0]["error.message.length"] > 0 and "error.message" not in results[0]  # capture is off


def test_write_file(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, WRITE)
    check_calls(entries, fake_llm, 1, ["success"], ["editor"], sources=FILES)
    assert (agent_home.workdir / "notes.md").is_file()


def test_subagent(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, SUBAGENT)
    check_calls(entries, fake_llm, 1, ["success", "success"], ["run_commands", "spawn_agent"], sources=FILES)
    spawn = next(e for e in entries if e["event.name"] == "tool.call" and e["gen_ai.tool.name"] == "spawn_agent")
    subs = [e for e in entries if e.get("gen_ai.agent.scope") == "subagent"]
    (agent_id,) = {e["gen_ai.agent.id"] for e in subs}
    names = sorted(e["event.name"] for e in subs)
    assert names == ["llm.response", "llm.response", "subagent.end", "subagent.start", "tool.call", "tool.result"]
    assert all(e.get("gen_ai.subagent.parent_tool_call.id") == spawn["gen_ai.tool.call.id"]
               for e in subs if e["event.name"] == "subagent.start")
    main_calls = [e for e in entries if e["event.name"] == "llm.response" and e not in subs]
    assert len(main_calls) == 2 and agent_id.startswith("agent_")
    statuses = statuses_of(entries)  # the sub-agent's TaskComplete does not settle the session
    assert statuses == ["idle", "running", "ready_for_review", "closed"]


def test_install_is_idempotent_and_uninstall_byte_identical(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    """A user's own hook stays untouched and running; ours come and go without a trace."""
    home = agent_home.home
    mine = home / HOOKS_DIR / "PreToolUse.sh"
    mine.parent.mkdir(parents=True)
    mine.write_text("#!/bin/sh\ncat > /dev/null\necho '{\"cancel\": false}'\n")
    mine.chmod(0o700)
    entries = run(agent_home, fake_llm, "tool_then_answer")
    assert tool_names(entries) == ["run_commands"]
    before = {p.name: p.read_bytes() for p in (home / HOOKS_DIR).iterdir()}
    providers = (home / PROVIDERS).read_bytes()
    assert len(before) == 10 and all(_ours(b) for n, b in before.items() if n != "PreToolUse.sh")
    again = collector(home, "install", "--agent", AGENT).stdout
    assert {p.name: p.read_bytes() for p in (home / HOOKS_DIR).iterdir()} == before, again
    collector(home, "uninstall", "--agent", AGENT)
    assert [p.name for p in (home / HOOKS_DIR).iterdir()] == ["PreToolUse.sh"]
    assert mine.read_bytes() == b"#!/bin/sh\ncat > /dev/null\necho '{\"cancel\": false}'\n"
    assert mine.stat().st_mode & 0o777 == 0o700 and (home / PROVIDERS).read_bytes() == providers


def _ours(content: bytes) -> bool:
    return b"agent-collector:managed" in content


def test_two_turns_resumed_in_the_terminal_ui(e2e_agents_bin: Path, agent_home: AgentHome,
                                             fake_llm: FakeLLMServer) -> None:
    """Turn 1 headless (`cline --json`), turn 2 in a new process that takes the session up again
    (`cline --id <session>`, typed into its terminal UI): one session, two turns, TaskResume a second start."""
    home, work = agent_home.home, agent_home.workdir
    port = free_port()
    write_agent_config(AGENT, home, work, fake_llm)
    collector(home, "install", "--agent", AGENT, port=port)
    first = run_agent(AGENT, home, work, fake_llm, f"Please write {work}/notes.md with a short note.")
    assert first.returncode == 0, first.stderr[-3000:]
    (messages,) = [p for p in session_files(AGENT, home, work) if p.name.endswith(".messages.json")]
    spool = data_dir(agent_home) / "spool" / AGENT

    def completions() -> int:
        return sum(line.count('"event":"TaskComplete"') for f in spool.glob("*.jsonl") for line in [f.read_text()])

    before = completions()
    second = run_cline_resumed(home, work, fake_llm, messages.parent.name, "Now run `ls -la` and summarise.",
                               done=lambda: completions() > before)
    assert "ls -la" in second.stdout
    assert second.returncode == 0, "Ctrl-C left the UI"
    assert lingering_pids(AGENT, home) == [] and not _processes_under(home)
    collector(home, "collect", "--once", "-q", port=port)
    entries = read_output(data_dir(agent_home) / "output")
    check_calls(entries, fake_llm, 2, ["success", "success"], ["editor", "run_commands"], sources=FILES)
    assert [p.name for p in session_files(AGENT, home, work) if p.name.endswith(".messages.json")] == [messages.name]
    assert starts_of(entries) == ["resume", "startup"]
    statuses = statuses_of(entries)
    assert statuses == ["idle", "running", "ready_for_review"] * 2 + ["closed"]
    # sessions.db's row is updated in place: a backfill sees its last state only
    assert [e["session.reason"] for e in entries if e["event.name"] == "session.end"] == ["completed"]
