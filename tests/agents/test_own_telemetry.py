"""Codex's and Qwen Code's own telemetry merged with their files and hooks (docs/merge.md): real runs of
each CLI with ``install --telemetry`` (tests/fixtures/codex-telemetry, tests/fixtures/qwen-code-telemetry)
replayed through the real OTLP spool, the real pipeline, the real JSONL output and usage store, and the
real ``report --json``: files alone, telemetry alone and both give each model call once, with the tokens
the fake model server recorded sending for that run; read in either order, the call keeps one id."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, collect, env_without_collector, long_after, prepare_fixture, read_output, usage_tuple

from collector.config import load_config
from collector.daemon.service import Service

AGENTS = {"codex": ".codex", "qwen-code": ".qwen"}  # agent -> its folder in HOME
EVENT = {"codex": "codex.sse_event", "qwen-code": "qwen-code.api_response"}


def _case(agent: str) -> Path:
    return FIXTURES / f"{agent}-telemetry" / "tool_then_answer"


def _served(agent: str) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in (_case(agent) / "response_usage.jsonl").read_text().splitlines() if x.strip()]
    return [d for d in lines if d.get("kind") == "response_usage"]


def _truth(agent: str) -> tuple[int, ...]:
    """(calls, input incl. cached, output, cache reads, cache writes): what the model server sent."""
    parts = [usage_tuple(d["api"], d["usage"]) for d in _served(agent)]
    return (len(parts), *(sum(p[i] for p in parts) for i in range(4)))


def _report(paths: Any) -> tuple[int, ...]:
    done = subprocess.run([sys.executable, "-m", "collector", "report", "session", "--json", "--timezone", "UTC",
                           "--store", str(paths.data_dir / "usage.sqlite")], capture_output=True, text=True,
                          env={**env_without_collector(), "HOME": str(paths.home)}, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    assert len(rows) == 1, rows
    return tuple(rows[0][k] for k in ("calls", "input_tokens", "output_tokens", "cache_read_tokens",
                                      "cache_write_tokens"))


def _calls(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What a reader of the JSONL output keeps of the model calls: the last line of each event.id."""
    return {e["event.id"]: e for e in entries if e["event.name"] == "llm.response"}


def _per_call(calls: dict[str, dict[str, Any]]) -> list[tuple[int, int, int]]:
    return sorted((e["gen_ai.usage.input_tokens"], e["gen_ai.usage.output_tokens"],
                   e["gen_ai.usage.cache_read.input_tokens"]) for e in calls.values())


def _served_per_call(agent: str) -> list[tuple[int, int, int]]:
    return sorted(usage_tuple(d["api"], d["usage"])[:3] for d in _served(agent))


def _files_only(paths: Any) -> None:
    shutil.rmtree(paths.spool_dir / "otlp")


def _telemetry_only(paths: Any, agent: str) -> None:
    shutil.rmtree(paths.home / AGENTS[agent])
    shutil.rmtree(paths.spool_dir / agent)


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_the_fixture_holds_the_agents_usage_events(agent: str) -> None:
    spool = next((_case(agent) / "spool" / "otlp" / agent).glob("*.jsonl")).read_text()
    assert EVENT[agent] in spool and "input_token_count" in spool
    assert len(_served(agent)) == 2


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_files_alone_telemetry_alone_and_both_count_each_call_once(tmp_path: Path, agent: str) -> None:
    results = {}
    for mode in ("files", "telemetry", "both"):
        paths = prepare_fixture(_case(agent), tmp_path / mode)
        if mode == "files":
            _files_only(paths)
        elif mode == "telemetry":
            _telemetry_only(paths, agent)
        calls = _calls(collect(paths, clock=long_after))
        assert _per_call(calls) == _served_per_call(agent), mode
        kinds = {e["source.kind"] for e in calls.values()}
        assert ("otel_log" in kinds) == (mode == "telemetry"), (mode, kinds)  # both: files read first
        results[mode] = _report(paths)
    assert results["files"] == results["telemetry"] == results["both"] == _truth(agent)


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_both_together_the_call_has_what_each_source_knows(tmp_path: Path, agent: str) -> None:
    """The files' ids and context in one entry: a pass reads the files before the telemetry
    (collector.sources.factory), whose equal usage then changes nothing (no correction, docs/merge.md)."""
    calls = _calls(collect(prepare_fixture(_case(agent), tmp_path), clock=long_after))
    served_ids = {d["response_id"] for d in _served(agent)}
    assert {e.get("gen_ai.response.id") for e in calls.values()} == served_ids
    assert all(e.get("gen_ai.turn.id") for e in calls.values())
    assert all(e["source.kind"] != "otel_log" for e in calls.values())
    assert not any("collector.call_keys" in e for e in calls.values())


@pytest.mark.parametrize("agent", sorted(AGENTS))
@pytest.mark.parametrize("first", ["files", "telemetry"])
def test_one_source_then_the_other_keeps_one_entry_per_call(tmp_path: Path, agent: str, first: str) -> None:
    """The daemon reads one source, delivers, then the other arrives: the later one pairs with the call
    delivered before (the same event.id), and the report counts each call once."""
    paths = prepare_fixture(_case(agent), tmp_path / "run")
    later = tmp_path / "later"
    later.mkdir()
    moved = [paths.spool_dir / "otlp"] if first == "files" else [paths.home / AGENTS[agent], paths.spool_dir / agent]
    for i, path in enumerate(moved):
        shutil.move(path, later / str(i))
    service = Service(paths, load_config(paths.config_file, env={}), output_dir=paths.output_dir, clock=long_after)
    service.startup()
    try:
        asyncio.run(service.collect_once())
        before = _calls(read_output(paths.output_dir))
        assert _per_call(before) == _served_per_call(agent)
        for i, path in enumerate(moved):
            shutil.move(later / str(i), path)
        asyncio.run(service.collect_once())
    finally:
        service.shutdown()
    after = _calls(read_output(paths.output_dir))
    assert set(after) == set(before)
    assert _per_call(after) == _served_per_call(agent)
    assert _report(paths) == _truth(agent)


def test_qwen_telemetry_gives_the_chat_logs_own_ids(tmp_path: Path) -> None:
    """Qwen Code's api_response event names the response id its chat log names: the same event.id."""
    files = prepare_fixture(_case("qwen-code"), tmp_path / "files")
    _files_only(files)
    alone = prepare_fixture(_case("qwen-code"), tmp_path / "telemetry")
    _telemetry_only(alone, "qwen-code")
    assert set(_calls(collect(files, clock=long_after))) == set(_calls(collect(alone, clock=long_after)))
