"""Entire external agent plugins with the real PyPI package entire-adapter 0.2.2 (its entire-agent-langgraph
and entire-agent-crewai executables), discovered from a temporary PATH. Sessions are written by the
package's own session bridge (what its LangGraph callback handler and CrewAI listener call) into the
session directory the plugin reports; the collector reads them incrementally through the plugins'
read-only subcommands across two polls and a restart, and nothing twice."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, assert_no_duplicates, assert_schema_valid, read_output
from support.external import VENV_BIN, Collector, git_repo, path_dir

entire_adapter = pytest.importorskip("entire_adapter")
HOOK = ROOT / "hooks" / "agent-collector-hook.sh"
from entire_adapter.adapter import _EntireSessionBridge  # noqa: E402  (the package's own transcript writer)


def bridge(repo: Path, framework: str, agent: str, session: str) -> Any:
    # EntireClient finds no `entire` on PATH and skips its hook calls (strict=False), as the package says.
    return _EntireSessionBridge(framework=framework, agent_label="planner", session_id=session,
                                repo_path=str(repo), model="fake-model", strict=False, entire_agent_name=agent)


def names(entries: list[dict[str, Any]]) -> list[str]:
    return sorted(e["event.name"] for e in entries)


def prompts(entries: list[dict[str, Any]]) -> list[int]:
    return sorted(e["gen_ai.input.messages.length"] for e in entries if e["event.name"] == "user.prompt")


@pytest.mark.skipif(shutil.which("git") is None, reason="the plugins find their session directory with git")
def test_langgraph_and_crewai_sessions_read_incrementally(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lg_repo, crew_repo = git_repo(tmp_path / "lg"), git_repo(tmp_path / "crew")
    bins = path_dir(tmp_path, {"entire-agent-langgraph": VENV_BIN / "entire-agent-langgraph",
                               "entire-agent-crewai": VENV_BIN / "entire-agent-crewai"})
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # the bridges run git only; no `entire`
    lg = bridge(lg_repo, "langgraph", "langgraph", "lg-session-1")
    lg.start_turn("Plan the release notes")
    lg.tool_start(tool_name="write_file", tool_input={"path": "docs/release.md"}, run_id="t1")
    lg.tool_end(output="written", run_id="t1")
    lg.assistant_text("Release notes drafted.")
    crew = bridge(crew_repo, "crewai", "crewai", "crew-session-1")
    crew.start_turn("Research the competitors")

    collector = Collector(tmp_path / "c", [lg_repo], [str(bins)], plugins=["langgraph"])
    first = collector.collect(monkeypatch)
    assert_schema_valid(first)
    assert names(first) == ["session.start", "user.prompt"]
    assert {e["gen_ai.agent.type"] for e in first} == {"langgraph"}
    prompt = next(e for e in first if e["event.name"] == "user.prompt")
    assert prompt["gen_ai.input.messages.length"] > 0 and "gen_ai.input.messages" not in prompt  # capture off
    assert prompt["agent.langgraph.modified_files"] == ["docs/release.md"]
    assert prompt["gen_ai.session.id"] == "lg-session-1" and prompt["source.kind"] == "entire_session"
    assert not [e for e in first if "gen_ai.usage.input_tokens" in e]  # no token_calculator: never asked
    status = collector.status()
    assert status["external_agents"]["plugins"]["langgraph"]["capabilities"] == [
        "compact_transcript", "hooks", "transcript_analyzer"]
    source = status["sources"]["langgraph:external"]
    assert source["kind"] == "external" and source["last_exit_code"] == 0 and source["errors"] == 0
    assert source["runs"] == 5  # get-session-dir, resolve-session-file, position, prompts, modified files

    second = collector.collect(monkeypatch)  # a restart, nothing new: one get-session-dir, no other call
    assert len(second) == len(first)
    assert collector.status()["sources"]["langgraph:external"]["runs"] == 1

    lg.start_turn("Now add the changelog")
    lg.tool_start(tool_name="edit", tool_input={"file_path": "CHANGELOG.md"}, run_id="t2")
    third = collector.collect(monkeypatch)
    assert_no_duplicates(third)
    new = [e for e in third if e["event.id"] not in {f["event.id"] for f in first}]
    assert names(new) == ["user.prompt"]
    assert new[0]["agent.langgraph.modified_files"] == ["CHANGELOG.md"]

    both = Collector(tmp_path / "both", [lg_repo, crew_repo], [str(bins)])
    entries = both.collect(monkeypatch)
    assert_no_duplicates(entries)
    by_agent = {(e["gen_ai.agent.type"], e["gen_ai.session.id"], e["event.name"]) for e in entries}
    # entire-adapter's plugins share one session directory per repository: each reads every session there
    assert ("crewai", "crew-session-1", "user.prompt") in by_agent
    assert ("langgraph", "lg-session-1", "user.prompt") in by_agent
    assert len([e for e in entries if e["event.name"] == "user.prompt"]) == 2 * 3


def test_off_by_default_nothing_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "ran"
    plugin = tmp_path / "bin" / "entire-agent-spy"
    plugin.parent.mkdir()
    plugin.write_text(f"#!/bin/sh\ntouch {marker}\necho '{{\"protocol_version\": 1}}'\n")
    plugin.chmod(0o755)
    collector = Collector(tmp_path / "c", [], [str(plugin.parent)], enabled=False)
    collector.collect(monkeypatch)
    assert not marker.exists()
    assert collector.status()["external_agents"]["plugins"] == {}


@pytest.mark.skipif(shutil.which("git") is None, reason="the plugins find their session directory with git")
def test_hook_payloads_through_the_plugins_parse_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The package's bridge sends its hook payloads to `entire hooks langgraph <hook>`; an `entire` here
    hands them to our hook script (as an integration would), and the real plugin's parse-hook turns them
    into Events: session start and end, the prompt (one entry with the polled one), the turn's end."""
    repo = git_repo(tmp_path / "lg")
    bins = path_dir(tmp_path, {"entire-agent-langgraph": VENV_BIN / "entire-agent-langgraph"})
    collector = Collector(tmp_path / "c", [repo], [str(bins)], plugins=["langgraph"])
    shim = tmp_path / "shim" / "entire"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec bash {HOOK} "$2" "$3" {collector.paths.spool_dir}\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}:/usr/bin:/bin")
    lg = bridge(repo, "langgraph", "langgraph", "lg-hooks-1")
    lg.start_turn("Summarise the open issues")
    lg.tool_start(tool_name="read_file", tool_input={"path": "ISSUES.md"}, run_id="t1")
    lg.tool_end(output="3 issues", run_id="t1")  # the package's checkpoint: a turn-end hook
    lg.end_session()

    entries = collector.collect(monkeypatch)
    assert_schema_valid(entries)
    assert_no_duplicates(entries)
    assert names(entries) == ["session.end", "session.start", "user.prompt"]
    end = next(e for e in entries if e["event.name"] == "session.end")
    assert end["agent.hook_event_name"] == "SessionEnd" and end["gen_ai.request.model"] == "fake-model"
    statuses = [e["session.status"] for e in read_output(collector.paths.output_dir)
                if e["event.name"] == "session.status"]
    assert "ready_for_review" in statuses and statuses[-1] == "closed"
    hooks = collector.status()["sources"]["langgraph:hooks"]
    assert hooks["parsed"] == 4 and hooks["errors"] == 0  # session-start, turn-start, turn-end, session-end


@pytest.mark.skipif(shutil.which("git") is None, reason="the plugins find their session directory with git")
def test_the_daemon_reads_on_across_polls_and_a_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from support.robust import Daemon

    repo = git_repo(tmp_path / "lg")
    bins = path_dir(tmp_path, {"entire-agent-crewai": VENV_BIN / "entire-agent-crewai"})
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    crew = bridge(repo, "crewai", "crewai", "crew-daemon-1")
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.toml").write_text(
        f'[external_agents]\nenabled = true\nrepos = ["{repo}"]\ninterval_s = 1\n')

    def prompts_seen(count: int) -> Any:
        return lambda es: len([e for e in es if e["gen_ai.agent.type"] == "crewai"
                               and e["event.name"] == "user.prompt"]) >= count

    crew.start_turn("Find three competitors")
    daemon = Daemon(tmp_path, {"PATH": f"{bins}:/usr/bin:/bin"}).start()
    try:
        daemon.wait_output(prompts_seen(1))
        crew.start_turn("Compare their pricing")  # the second poll of the running daemon
        daemon.wait_output(prompts_seen(2))
    finally:
        assert daemon.stop() == 0
    crew.start_turn("Write the summary")
    daemon = Daemon(tmp_path, {"PATH": f"{bins}:/usr/bin:/bin"}).start()
    try:
        entries = daemon.wait_output(prompts_seen(3))
    finally:
        assert daemon.stop() == 0
    entries = [e for e in entries if e["gen_ai.agent.type"] == "crewai"]
    assert_no_duplicates(entries)
    assert names(entries) == ["session.start", "user.prompt", "user.prompt", "user.prompt"]
    assert len(set(prompts(entries))) == 3  # three different prompts, each once
