"""Issue 26's first proof, with the real CLIs: Claude Code, Codex and Qwen Code each run once (one prompt,
one tool call) with `agent-collector install --telemetry` and the daemon up, against the fake model server.
From that one captured state (the agent's own files, the hook spool, the OTLP spool) `collect --once` runs
three times, each on a fresh data folder (nothing derived kept, only the spool): files alone (the OTLP spool
moved aside), telemetry alone (the agent's folder and its hook spool moved aside) and both. Each time every
model call is one ``llm.response`` (the last line of its ``event.id``) with the tokens the server sent for
it, and `report --json` gives the server's totals; files alone and both give the same event ids (a pass
reads the files before the telemetry, which then pairs with the file's entry: docs/merge.md), and in both
the telemetry was read and folded into those entries (corrected or dropped as a duplicate)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from collector_e2e import collector, collector_env, collector_status, data_dir
from fake_llm import FakeLLMServer
from harness import AgentHome, describe, run_scenario, write_agent_config
from support import ROOT, read_output, usage_tuple
from support.waits import free_port, wait_for, wait_listening

pytestmark = pytest.mark.e2e
FOLDER = {"claude-code": ".claude", "codex": ".codex", "qwen-code": ".qwen"}  # the agent's files in HOME
MODES = ("files", "telemetry", "both")


def _served_per_call(server: FakeLLMServer) -> list[tuple[int, int, int, int]]:
    """(input incl. cached, output, cache reads, cache writes) of each call, as the server sent them."""
    return sorted(usage_tuple(r["api"], r["usage"]) for r in server.responses if r.get("kind") == "response_usage")


def _calls(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The model calls a reader of the JSONL output keeps: the last line of each ``event.id`` (a call the
    merge changed after delivering it comes again as a correction, docs/merge.md); any line after an id's
    first must be such a correction."""
    last: dict[str, dict[str, Any]] = {}
    for entry in (e for e in entries if e["event.name"] == "llm.response"):
        assert entry["event.id"] not in last or "collector.correction" in entry, entry
        last[entry["event.id"]] = entry
    return list(last.values())


def _per_call(calls: list[dict[str, Any]]) -> list[tuple[int, int, int, int]]:
    return sorted((e["gen_ai.usage.input_tokens"], e["gen_ai.usage.output_tokens"],
                   e.get("gen_ai.usage.cache_read.input_tokens", 0),
                   e.get("gen_ai.usage.cache_creation.input_tokens", 0)) for e in calls)


def _report(env: AgentHome) -> list[tuple[Any, ...]]:
    rows = json.loads(collector(env.home, "report", "session", "--json", "--timezone", "UTC").stdout)["rows"]
    return [tuple(r[k] for k in ("calls", "input_tokens", "output_tokens", "cache_read_tokens",
                                 "cache_write_tokens")) for r in rows]


def _inputs(env: AgentHome, agent: str, mode: str) -> list[Path]:
    """What a mode leaves out of the captured state."""
    spool = data_dir(env) / "spool"
    if mode == "files":
        return [spool / "otlp"]
    if mode == "telemetry":
        return [env.home / FOLDER[agent], spool / agent]
    return []


def _collect(env: AgentHome, agent: str, mode: str, aside: Path) -> tuple[list[dict[str, Any]], list[Any]]:
    """`collect --once` on a data folder holding only the spool (minus what ``mode`` leaves out); returns
    the entries written and the session report. Everything moved aside is put back."""
    for path in data_dir(env).iterdir():
        if path.name != "spool":
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    moved = [(p, aside / mode / str(i)) for i, p in enumerate(_inputs(env, agent, mode)) if p.exists()]
    assert len(moved) == len(_inputs(env, agent, mode)), f"{mode}: every input to leave out was captured"
    for src, dst in moved:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(src, dst)
    try:
        collector(env.home, "collect", "--once", "-q")
        return read_output(data_dir(env) / "output"), _report(env)
    finally:
        for src, dst in moved:
            shutil.move(dst, src)


def _capture(agent: str, env: AgentHome, server: FakeLLMServer) -> None:
    """install --telemetry, the daemon up, one prompt with one tool call; returns once the daemon has
    spooled the agent's telemetry (its source read records from it) and stopped."""
    port = free_port()
    write_agent_config(agent, env.home, env.workdir, server)
    collector(env.home, "install", "--agent", agent, "--telemetry", port=port)
    proc = subprocess.Popen([sys.executable, "-m", "collector", "run"], cwd=ROOT,
                            env=collector_env(env.home, port), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_listening(port)
        results = run_scenario(agent, "tool_then_answer", env.home, env.workdir, server, log_dir=env.root)
        assert all(r.returncode == 0 for r in results), describe(results)
        served = len(_served_per_call(server))
        wait_for(lambda: len(_usage_records(env, agent)) >= served, timeout=30,
                 what=f"{served} usage records of {agent}'s own telemetry in the OTLP spool")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err.decode()[-3000:]


USAGE_EVENT = {"claude-code": "claude_code.api_request", "codex": "codex.sse_event",
               "qwen-code": "qwen-code.api_response"}


def _usage_records(env: AgentHome, agent: str) -> list[dict[str, Any]]:
    """The spooled log records of the agent's per-call usage event (Codex: its ``response.completed`` with
    counts)."""
    folder = data_dir(env) / "spool" / "otlp" / agent
    lines = [json.loads(x) for f in sorted(folder.glob("*.jsonl")) for x in f.read_text().splitlines() if x]
    records = [r for line in lines if line["event"] == "logs" for res in line["payload"]["export"]["resourceLogs"]
               for scope in res["scopeLogs"] for r in scope["logRecords"]]

    def attrs(r: dict[str, Any]) -> dict[str, Any]:
        return {a["key"]: next(iter(a["value"].values()), None) for a in r.get("attributes", [])}

    def names(r: dict[str, Any]) -> set[Any]:
        return {r.get("eventName"), attrs(r).get("event.name"), (r.get("body") or {}).get("stringValue")}

    usage = [r for r in records if USAGE_EVENT[agent] in names(r)]
    if agent == "codex":
        usage = [r for r in usage if attrs(r).get("event.kind") == "response.completed"
                 and "input_token_count" in attrs(r)]  # each is logged twice, once without counts
    return usage


@pytest.mark.parametrize("agent", sorted(FOLDER))
def test_files_alone_telemetry_alone_and_both_count_each_call_once(
        e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer, tmp_path: Path, agent: str) -> None:
    _capture(agent, agent_home, fake_llm)
    served = _served_per_call(fake_llm)
    assert served, "the server answered model calls"
    truth = [(len(served), *(sum(c[i] for c in served) for i in range(4)))]
    seen: dict[str, list[dict[str, Any]]] = {}
    for mode in MODES:
        entries, report = _collect(agent_home, agent, mode, tmp_path / "aside")
        calls = _calls(entries)
        seen[mode] = calls
        assert len(calls) == len(served), (mode, calls)
        assert _per_call(calls) == served, mode
        kinds = {c["source.kind"] for c in calls}
        assert ("otel_log" in kinds) == (mode == "telemetry"), (mode, kinds)  # both: the file's entry kept
        status = collector_status(agent_home)
        read = status["sources"].get(f"{agent}:telemetry", {}).get("records", 0)
        assert (read >= len(served)) == (mode != "files"), (mode, read)
        if mode == "both":  # each call's telemetry folded into the file's entry: corrected or a duplicate
            folded = status["pipeline"]["corrections"] + status["pipeline"]["duplicates"]
            assert folded >= len(served), status["pipeline"]
        assert report == truth, mode
    ids = {mode: {c["event.id"] for c in calls} for mode, calls in seen.items()}
    assert ids["files"] == ids["both"], ids
