"""Claude Code's own telemetry merged with its transcript and hooks (docs/merge.md): a streamed transcript
whose last answer has placeholder usage (stop_reason null, output_tokens 1) replayed with its
``claude_code.api_request`` events through the real OTLP spool, the real pipeline, the real JSONL output
and usage store, and the real ``report --json``: the true output tokens, each call counted once, whatever
arrives first; telemetry alone gives the totals files alone give."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from support import FIXTURES, collect, env_without_collector, long_after, prepare_fixture, read_output

from collector.agents import claude_otel
from collector.config import load_config
from collector.daemon.service import Service
from collector.model import RawRecord
from collector.model.entry import UNREADABLE

CASE = FIXTURES / "claude-code-telemetry" / "streamed_placeholder"
ORIGINAL = FIXTURES / "claude-code" / "tool_then_answer"  # what CASE was built from (its README)
OTLP = Path("otlp") / "claude-code"


def _served() -> dict[str, dict[str, int]]:
    """The model server's own record of each call (response id -> usage)."""
    lines = [json.loads(x) for x in (ORIGINAL / "response_usage.jsonl").read_text().splitlines() if x.strip()]
    return {d["response_id"]: d["usage"] for d in lines}


def _report(paths: Any) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "collector", "report", "session", "--json", "--timezone", "UTC",
                           "--store", str(paths.data_dir / "usage.sqlite")], capture_output=True, text=True,
                          env={**env_without_collector(), "HOME": str(paths.home)}, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    assert len(rows) == 1, rows
    return dict(rows[0])


def _totals(row: dict[str, Any]) -> tuple[int, ...]:
    return tuple(row[k] for k in ("calls", "input_tokens", "output_tokens", "cache_read_tokens",
                                  "cache_write_tokens"))


def _last_per_id(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What a reader of the JSONL output keeps of the model calls: the last line of each event.id."""
    return {e["event.id"]: e for e in entries if e["event.name"] == "llm.response"}


def _truth() -> tuple[int, ...]:
    served = _served().values()
    return (len(served), sum(u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
                             for u in served),
            sum(u["output_tokens"] for u in served), sum(u["cache_read_input_tokens"] for u in served),
            sum(u["cache_creation_input_tokens"] for u in served))


def test_the_fixture_has_the_placeholder_it_claims() -> None:
    transcript = next((CASE / "home").rglob("*.jsonl")).read_text().splitlines()
    placeholders = [json.loads(x)["message"] for x in transcript if '"stop_reason":null' in x]
    assert placeholders and all(m["usage"]["output_tokens"] == 1 for m in placeholders)
    assert _served()[placeholders[0]["id"]]["output_tokens"] == 17


def test_files_alone_flag_the_placeholder_as_incomplete(tmp_path: Path) -> None:
    paths = prepare_fixture(CASE, tmp_path)
    shutil.rmtree(paths.spool_dir / OTLP)
    calls = _last_per_id(collect(paths, clock=long_after))
    incomplete = [e for e in calls.values() if e.get("gen_ai.usage.incomplete")]
    assert [e["gen_ai.usage.output_tokens"] for e in incomplete] == [1]
    assert _report(paths)["output_tokens"] == _truth()[2] - 17 + 1  # what the transcript alone knows


def test_telemetry_with_files_gives_the_true_output_tokens_once(tmp_path: Path) -> None:
    paths = prepare_fixture(CASE, tmp_path)
    entries = collect(paths, clock=long_after)
    calls = _last_per_id(entries)
    served = _served()
    assert {e["gen_ai.response.id"]: e["gen_ai.usage.output_tokens"] for e in calls.values()} == \
        {rid: u["output_tokens"] for rid, u in served.items()}
    assert not any(e.get("gen_ai.usage.incomplete") for e in calls.values())
    assert all(e["collector.sources_of"]["gen_ai.usage.output_tokens"] == "otel_log" for e in calls.values())
    assert _totals(_report(paths)) == _truth()


def test_transcript_first_then_telemetry_corrects_the_call(tmp_path: Path) -> None:
    """The order Claude Code makes: the streamed line is on disk long before its api_request event is
    exported. The call is delivered with the placeholder, then once again as a correction; the usage
    store replaces its row, the report counts it once with the true tokens."""
    paths = prepare_fixture(CASE, tmp_path)
    later = tmp_path / "later"
    shutil.move(paths.spool_dir / OTLP, later)
    service = Service(paths, load_config(paths.config_file, env={}), output_dir=paths.output_dir,
                      clock=long_after)
    service.startup()
    try:
        asyncio.run(service.collect_once())
        first = _last_per_id(read_output(paths.output_dir))
        assert sorted(e["gen_ai.usage.output_tokens"] for e in first.values()) == [1, 49]
        shutil.move(later, paths.spool_dir / OTLP)
        asyncio.run(service.collect_once())
    finally:
        service.shutdown()
    entries = read_output(paths.output_dir)
    corrections = [e for e in entries if e.get("collector.correction")]
    placeholder = next(e for e in corrections if e["collector.replaces"].get("gen_ai.usage.output_tokens") == 1)
    assert placeholder["gen_ai.usage.output_tokens"] == 17 and "gen_ai.usage.incomplete" not in placeholder
    assert set(_last_per_id(entries)) == set(first)  # the same ids: one entry per call
    status = json.loads((paths.state_dir / "status.json").read_text())
    assert status["pipeline"]["corrections"] == status["exporters"]["usage_store"]["corrected"] == len(corrections)
    assert _totals(_report(paths)) == _truth()


def test_telemetry_alone_gives_the_totals_files_alone_give(tmp_path: Path) -> None:
    alone = prepare_fixture(CASE, tmp_path / "telemetry")
    shutil.rmtree(alone.home / ".claude")
    shutil.rmtree(alone.spool_dir / "claude-code")
    collect(alone, clock=long_after)
    files = prepare_fixture(ORIGINAL, tmp_path / "files")  # the transcript as Claude Code finished it
    shutil.rmtree(files.spool_dir)
    collect(files, clock=long_after)
    assert _totals(_report(alone)) == _totals(_report(files)) == _truth()


def _api_request(**attrs: Any) -> RawRecord:
    log = {"attributes": {"event.name": "api_request", "input_tokens": "5", "cache_read_tokens": "0",
                          "cache_creation_tokens": "0", "output_tokens": "7", **attrs}}
    return RawRecord("claude-code", "otel_log", {"log": log, "request": "d" * 32, "index": 0}, "s", "0:0", 1)


def test_an_api_request_that_cannot_be_paired_is_counted_not_delivered_twice() -> None:
    """A wrong-typed session.id or model leaves no key to pair the call with its transcript line: it is
    counted (the hostile-input sweep, seed 35, saw it delivered as a second llm.response); with a request id
    the call still pairs, and the wrong type is counted beside it."""
    good = claude_otel.parse_log(_api_request(**{"session.id": "s1", "model": "m"}))
    assert [e.name for e in good] == ["llm.response"]
    (marker,) = claude_otel.parse_log(_api_request(**{"session.id": 1.5, "model": "m"}))
    assert marker.name == UNREADABLE and "session.id is a number, not a string" in marker.attributes["reason"]
    (marker,) = claude_otel.parse_log(_api_request(model="m"))  # an attribute value the decoder could not read
    assert marker.attributes["reason"] == "api_request has no session.id"
    paired = claude_otel.parse_log(_api_request(**{"session.id": "s1", "model": ["m"], "request_id": "r1"}))
    assert [e.name for e in paired] == ["llm.response", UNREADABLE]
