"""What every agent's end-to-end test does: install the collector into the throwaway HOME with its own
installer, run a scenario with the real CLI (optionally with the daemon up, as a service would be), collect,
and check the facts every agent must get right."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fake_llm import FakeLLMServer
from harness import AgentHome, Scenario, describe, run_scenario, write_agent_config
from support import (
    ROOT,
    assert_no_duplicates,
    assert_schema_valid,
    entry_tokens,
    read_output,
    tool_pairs,
    truth_from_lines,
)
from support.waits import free_port, wait_listening

Entries = list[dict[str, Any]]
# OpenCode and Kilo Code run a background `npm install` of plugin dependencies against the harness's dead
# registry port; with npm's default retries every run would wait about 70 s.
NO_NPM_RETRY = {"npm_config_fetch_retries": "0"}


def collector_env(home: Path, port: int | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_COLLECTOR_", "XDG_", "CODEX_"))}
    env.update(HOME=str(home), AGENT_COLLECTOR_HOME=str(home))
    if port is not None:
        env["AGENT_COLLECTOR_INGEST__PORT"] = str(port)
    return env


def collector(home: Path, *args: str, port: int | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "collector", *args], cwd=ROOT, env=collector_env(home, port),
                            capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, f"agent-collector {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result


def data_dir(env: AgentHome) -> Path:
    return env.home / ".local" / "share" / "agent-collector"


def run_collected(agent: str, env: AgentHome, server: FakeLLMServer, scenario: str | Scenario, daemon: bool = False,
                  extra_env: Mapping[str, str] | None = None) -> Entries:
    """install -> the scenario with the real CLI [with `agent-collector run` up] -> collect --once."""
    port = free_port()
    write_agent_config(agent, env.home, env.workdir, server)
    collector(env.home, "install", "--agent", agent, port=port)
    proc = None
    if daemon:
        proc = subprocess.Popen([sys.executable, "-m", "collector", "run"], cwd=ROOT,
                                env=collector_env(env.home, port), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if proc is not None:
            wait_listening(port)
        results = run_scenario(agent, scenario, env.home, env.workdir, server, log_dir=env.root, extra_env=extra_env)
        assert all(r.returncode == 0 for r in results), describe(results)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err.decode()[-3000:]
    collector(env.home, "collect", "--once", "-q", port=port)  # whatever the daemon had not read yet
    return read_output(data_dir(env) / "output")


def check_session(entries: Entries, server: FakeLLMServer, turns: int, unrecorded_calls: int = 0,
                  sources: tuple[str, ...] = ("hook", "transcript")) -> dict[str, tuple[int, int, str | None]]:
    """One session, one prompt per turn, every model call with the server's exact token numbers (but the
    ``unrecorded_calls`` the agent keeps nowhere), each tool call paired with one result, no duplicates,
    schema-valid, every call inside a turn, and both inputs read. Returns the tool pairs."""
    assert_schema_valid(entries)
    assert_no_duplicates(entries)
    sessions = {e["gen_ai.session.id"] for e in entries if "gen_ai.session.id" in e}
    assert len(sessions) == 1, sessions
    prompts = [e for e in entries if e["event.name"] == "user.prompt"]
    assert len(prompts) == turns == len({p["gen_ai.turn.id"] for p in prompts})
    served, seen = truth_from_lines(server.responses), entry_tokens(entries)
    assert sum(served.values()) >= 2 * turns + unrecorded_calls, "the server answered every model call"
    assert not seen - served, "no model call with numbers the server did not send"
    assert sum((served - seen).values()) == unrecorded_calls, "every model call with the server's exact numbers"
    pairs = tool_pairs(entries)
    assert pairs and all(calls == 1 and results == 1 for calls, results, _ in pairs.values()), pairs
    turn_ids = {p["gen_ai.turn.id"] for p in prompts}
    assert all(e.get("gen_ai.turn.id") in turn_ids
               for e in entries if e["event.name"] in ("llm.response", "tool.call", "tool.result"))
    kinds = {e.get("source.kind") for e in entries if e["event.name"] != "session.status"}
    assert set(sources) <= kinds, f"inputs read: {kinds}"
    return pairs


def collector_status(env: AgentHome) -> dict[str, Any]:
    """What the last collector run saved as its status (state/status.json)."""
    return json.loads((data_dir(env) / "state" / "status.json").read_text())


def check_sources_read(env: AgentHome, *sources: str, duplicates: bool = False) -> dict[str, Any]:
    """Each named source (``<agent>:<name>``) gave records; with ``duplicates``, the pipeline dropped some
    (two inputs, e.g. a plugin and the agent's database, told the same facts). Returns the status."""
    status = collector_status(env)
    for source in sources:
        assert status["sources"][source]["records"] > 0, f"{source} read nothing"
    if duplicates:
        assert status["pipeline"]["duplicates"] > 0, "the second input's copies of the same facts were dropped"
    return status


def end_reasons(entries: Entries) -> list[Any]:
    return [e["session.reason"] for e in entries if e["event.name"] == "session.end"]


def check_calls(entries: Entries, server: FakeLLMServer, turns: int, results: list[str], tools: list[str] | None,
                **session: Any) -> dict[str, tuple[int, int, str | None]]:
    """``check_session`` (``session``: its options), then the tool results' statuses and (unless None) the
    tools' names (each in any order). Returns the tool pairs."""
    pairs = check_session(entries, server, turns, **session)
    assert result_statuses(pairs) == sorted(results)
    if tools is not None:
        assert tool_names(entries) == sorted(tools)
    return pairs


def check_tool_then_answer(env: AgentHome, entries: Entries, server: FakeLLMServer, tools: list[str],
                           statuses: list[str] | None = None, **session: Any) -> dict[str, Any]:
    """The `tool_then_answer` scenario: one turn whose tool calls (``tools``) all succeeded (``check_calls``,
    ``session``: its options), the report agreeing with the server and, unless None, the session's statuses
    in order. Returns the session report."""
    check_calls(entries, server, 1, ["success"] * len(tools), tools, **session)
    report = check_report(env, server, unrecorded_calls=session.get("unrecorded_calls", 0))
    if statuses is not None:
        assert statuses_of(entries) == statuses
    return report


def run_read(agent: str, env: AgentHome, server: FakeLLMServer, scenario: str, *sources: str,
             extra_env: Mapping[str, str] | None = None) -> Entries:
    """``run_collected``, then each of ``sources`` (``<agent>:<name>``) gave records and told again what the
    agent's hooks or plugin had already said: the pipeline dropped those copies."""
    entries = run_collected(agent, env, server, scenario, extra_env=extra_env)
    check_sources_read(env, *sources, duplicates=True)
    return entries


def collect_files_alone(files: list[Path], home: Path, into: Path) -> Entries:
    """The agent's own ``files`` (under ``home``) copied into a fresh HOME ``into`` with no spool, collected
    with `collect --once`: what a backfill from them alone gives."""
    for path in files:
        target = into / path.relative_to(home)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    collector(into, "collect", "--once", "-q")
    return read_output(into / ".local" / "share" / "agent-collector" / "output")


def facts(entries: Entries, hook_only: set[str]) -> set[tuple[str, str]]:
    """Each entry's (event name, id), but of the kinds that only hooks or plugins know."""
    return {(e["event.name"], e["event.id"]) for e in entries if e["event.name"] not in hook_only}


def check_resumed(entries: Entries, starts: list[str], ends: list[str]) -> None:
    """A session that a second process took up again: its starts (``session.source``, any order), its ends
    (``session.reason``, in order) and its status, closed by the first process and running again after."""
    assert starts_of(entries) == sorted(starts)
    assert end_reasons(entries) == ends
    check_closed_then_resumed(statuses_of(entries))


def check_closed_then_resumed(statuses: list[str]) -> None:
    """The first process closed the session; the process that resumed it ran it again and closed it."""
    assert statuses[-1] == "closed" and "running" in statuses[statuses.index("closed"):], statuses


def check_exit_code_failure(entries: Entries) -> dict[str, Any]:
    """The one tool result, of a shell command that exited 1: an error with its exit code, its message
    kept only as a length (content capture is off). Returns it."""
    results = [e for e in entries if e["event.name"] == "tool.result"]
    assert [(r["error.type"], r["process.exit.code"]) for r in results] == [("exit_code", 1)], results
    assert results[0]["error.message.length"] > 0 and "error.message" not in results[0]
    return results[0]


def statuses_of(entries: Entries) -> list[str]:
    ordered = sorted(entries, key=lambda e: e["time_unix_nano"])
    return [e["session.status"] for e in ordered if e["event.name"] == "session.status"]


def tool_names(entries: Entries) -> list[str]:
    return sorted(e["gen_ai.tool.name"] for e in entries if e["event.name"] == "tool.call")


def result_statuses(pairs: dict[str, tuple[int, int, str | None]]) -> list[str | None]:
    return sorted((status for _, _, status in pairs.values()), key=str)


def starts_of(entries: Entries) -> list[str]:
    return sorted(str(e.get("session.source")) for e in entries if e["event.name"] == "session.start")


def check_report(env: AgentHome, server: FakeLLMServer, unrecorded_calls: int = 0) -> dict[str, Any]:
    """`agent-collector report` on what was just collected: per day (UTC), per model and for the one session,
    the calls and tokens are the server's own records of the calls the agent kept (all but
    ``unrecorded_calls``). Returns the session report."""
    from collections import Counter
    from datetime import UTC, datetime

    from support import usage_tuple

    served = [r for r in server.responses if r.get("kind") == "response_usage"]
    left = Counter(entry_tokens(read_output(data_dir(env) / "output")))
    kept = []
    for record in served:
        key = usage_tuple(record["api"], record["usage"])
        if left[key] > 0:
            left[key] -= 1
            kept.append(record)
    assert len(kept) == len(served) - unrecorded_calls

    def sums(records: list[dict[str, Any]]) -> tuple[int, int, int, int, int]:
        parts = [usage_tuple(r["api"], r["usage"]) for r in records]
        return (len(parts), *(sum(p[i] for p in parts) for i in range(4)))

    def row(r: dict[str, Any]) -> tuple[int, int, int, int, int]:
        return (r["calls"], r["input_tokens"], r["output_tokens"], r["cache_read_tokens"], r["cache_write_tokens"])

    def report(kind: str) -> dict[str, Any]:
        out = collector(env.home, "report", kind, "--json", "--timezone", "UTC").stdout
        return json.loads(out)

    days: dict[str, list[dict[str, Any]]] = {}
    for record in kept:
        days.setdefault(datetime.fromtimestamp(record["ts"], UTC).date().isoformat(), []).append(record)
    assert {r["key"]: row(r) for r in report("daily")["rows"]} == {d: sums(v) for d, v in days.items()}
    models = report("model")["rows"]
    if all(r.get("model") for r in kept):
        assert {r["key"]: row(r) for r in models} == {
            m: sums([r for r in kept if r["model"] == m]) for m in {r["model"] for r in kept}}
    session = report("session")
    (only,) = session["rows"]
    assert row(only) == sums(kept) and only["project"]
    return session
