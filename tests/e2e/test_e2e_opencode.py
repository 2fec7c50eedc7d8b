"""Real OpenCode 1.18.33 (from npm) against the fake Chat Completions server, with the collector installed
by `agent-collector install` (the spool plugin in ~/.config/opencode/plugin) into a throwaway HOME: three
scenarios, every acceptance fact checked. The plugin's events and the SQLite store describe the same
things. One model call cannot be accounted: OpenCode stores the usage of its session-title call nowhere,
so every call but that one must carry the server's exact numbers, and the one missing must be it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from collector_e2e import (
    NO_NPM_RETRY,
    check_calls,
    check_exit_code_failure,
    check_resumed,
    check_tool_then_answer,
    collector,
    data_dir,
    end_reasons,
    run_read,
)
from fake_llm import FakeLLMServer
from harness import AgentHome, make_env
from npm_agents import agent_bin
from support import assert_no_duplicates, assert_schema_valid, entry_tokens, read_output, truth_from_lines

pytestmark = pytest.mark.e2e
AGENT = "opencode"


def run(env: AgentHome, server: FakeLLMServer, scenario: str) -> list[dict[str, Any]]:
    return run_read(AGENT, env, server, scenario, "opencode:db", extra_env=NO_NPM_RETRY)  # after the plugin


def title_calls(server: FakeLLMServer) -> int:
    """Model calls with OpenCode's title-generator system prompt (its usage is stored nowhere)."""
    return sum(1 for r in server.model_calls
               if "title generator" in str(((r.get("body") or {}).get("messages") or [{}])[0].get("content")))


def check(entries: list[dict[str, Any]], server: FakeLLMServer, turns: int, results: list[str],
          tools: list[str]) -> None:
    assert title_calls(server) == 1
    check_calls(entries, server, turns, results, tools, unrecorded_calls=1, sources=("hook",))


def test_tool_then_answer(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "tool_then_answer")
    assert title_calls(fake_llm) == 1  # the title call: its usage is stored nowhere
    session = check_tool_then_answer(agent_home, entries, fake_llm, ["bash"], unrecorded_calls=1, sources=("hook",))
    assert session["rows"][0]["agent_cost_usd"] is not None, "OpenCode's own cost figure is shown next to ours"


def test_two_turns_resumed_in_a_new_process(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    entries = run(agent_home, fake_llm, "two_turns_resume")
    check(entries, fake_llm, 2, ["success", "success"], ["bash", "write"])
    # `opencode run --continue` announces nothing: one start (the session row); each of the two processes
    # ends by disposing the plugin, which ends the session (for now: the second run took it up again)
    check_resumed(entries, starts=["startup"], ends=["exit", "exit"])


def test_failing_command(e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    entries = run(agent_home, fake_llm, "failing_command")
    check(entries, fake_llm, 1, ["error"], ["bash"])  # tool.execute.after does not fire for it: the db knows
    check_exit_code_failure(entries)


def test_a_session_deleted_with_opencodes_cli_is_closed(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    """`opencode session delete` (OpenCode's own CLI) publishes session.deleted to our plugin: the session
    ends (`session.reason: deleted`) and its status is `closed`. The run before it ended with OpenCode
    disposing the plugin at exit, which already closed the session once (`session.reason: exit`)."""
    entries = run(agent_home, fake_llm, "tool_then_answer")
    (session,) = {e["gen_ai.session.id"] for e in entries if "gen_ai.session.id" in e}
    assert end_reasons(entries) == ["exit"]
    env = make_env(AGENT, agent_home.home, agent_home.workdir, fake_llm, NO_NPM_RETRY)
    deleted = subprocess.run([str(agent_bin(AGENT)), "session", "delete", session], cwd=agent_home.workdir,
                             env=env, capture_output=True, text=True, timeout=180)
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    collector(agent_home.home, "collect", "--once", "-q")
    after = read_output(data_dir(agent_home) / "output")
    ends = [e for e in after if e["event.name"] == "session.end"]
    assert [e["session.reason"] for e in ends] == ["exit", "deleted"]
    assert all(e["gen_ai.session.id"] == session for e in ends)
    last = sorted((e for e in after if e["event.name"] == "session.status"), key=lambda e: e["time_unix_nano"])[-1]
    # closed it stays: the status kept with the checkpoints says closed already (the dispose at exit), so
    # the deletion ends the session again without a status change back to anything else
    assert last["session.status"] == "closed"
    assert last["agent.hook_event_name"] in ("plugin.dispose", "session.deleted")


def test_subagent_is_linked_to_the_task_call(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    """The model calls `task`; OpenCode runs the sub-agent as a child session, which runs `echo from-helper`.
    The child's work is the sub-agent's, in the parent session and turn, linked to the task call (hooks
    first, then the database saying the same); the child's own start, status and end stay in its session."""
    entries = run(agent_home, fake_llm, "subagent")
    assert_schema_valid(entries)
    assert_no_duplicates(entries)
    (prompt,) = [e for e in entries if e["event.name"] == "user.prompt"]
    (task,) = [e for e in entries if e["event.name"] == "tool.call" and e["gen_ai.tool.name"] == "task"]
    inside = [e for e in entries if e.get("gen_ai.agent.scope") == "subagent" and e["event.name"] != "session.start"]
    assert {"subagent.start", "subagent.end", "llm.response", "tool.call", "tool.result"} <= {
        e["event.name"] for e in inside}
    (child,) = {e["gen_ai.agent.id"] for e in inside}
    call_id = task["gen_ai.tool.call.id"]
    links = {(e["gen_ai.session.id"], e["gen_ai.turn.id"], e["gen_ai.subagent.parent_tool_call.id"]) for e in inside}
    assert links == {(prompt["gen_ai.session.id"], prompt["gen_ai.turn.id"], call_id)}
    (result,) = [e for e in entries if e["event.name"] == "tool.result" and e["gen_ai.tool.call.id"] == call_id]
    assert result["gen_ai.subagent.id"] == child and result["tool.result.status"] == "success"
    own = {e["event.name"] for e in entries if e.get("gen_ai.session.id") == child}
    assert own == {"session.start", "session.status", "session.end"}
    served, seen = truth_from_lines(fake_llm.responses), entry_tokens(entries)
    assert not seen - served and sum((served - seen).values()) == title_calls(fake_llm) == 1
