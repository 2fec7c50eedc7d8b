"""Acceptance: the Claude Code fixture sessions, exported over real OTLP/HTTP protobuf to a local receiver.

Entries come from the lead's pipeline run on the real captures (tests/fixtures/claude-code/*); the
receiver decodes what the SDK exporters really sent. Token sums over all spans must equal the model
server's own usage records.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, collect, make_paths, prepare_fixture, truth_from_file
from support.otlp_receiver import OtlpReceiver

from collector.exporters.otlp import build_otlp_exporters
from collector.exporters.otlp_metrics import DURATION_BUCKETS, TOKEN_BUCKETS
from collector.exporters.queue import QueuedExporter, QueueOptions

FAST = QueueOptions(backoff_initial=0.05, backoff_max=0.2, tick_interval=0.05, drain_timeout=5.0)
CASES = ["tool_then_answer", "two_turns_resume"]


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver().start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def fixture_entries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for case in CASES:
        tmp = tmp_path_factory.mktemp(case)
        out[case] = collect(prepare_fixture(FIXTURES / "claude-code" / case, tmp))
    return out


def export_all(
    entries: list[dict[str, Any]], endpoint: str, tmp: Path, **config: Any
) -> list[QueuedExporter]:
    cfg = {"endpoint": endpoint, "turn_grace": 0, "timeout": 2, **config}
    exporters = build_otlp_exporters(cfg, {}, make_paths(tmp), options=FAST)
    for exporter in exporters:
        exporter.export(entries)
    for exporter in exporters:
        assert isinstance(exporter, QueuedExporter)
        assert exporter.flush(20), exporter.stats()
    for exporter in exporters:
        exporter.shutdown()
    return [e for e in exporters if isinstance(e, QueuedExporter)]


def children(spans: list[dict[str, Any]], parent: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in spans if s["parent_id"] == parent["span_id"]]


@pytest.mark.parametrize("case", CASES)
def test_fixture_session_as_logs_traces_and_metrics(
    case: str, fixture_entries: dict[str, list[dict[str, Any]]], receiver: OtlpReceiver, tmp_path: Path
) -> None:
    entries = fixture_entries[case]
    expected = json.loads((FIXTURES / "claude-code" / case / "expected.json").read_text())
    truth = truth_from_file(FIXTURES / "claude-code" / case / "response_usage.jsonl")
    export_all(entries, receiver.endpoint, tmp_path)

    # -- logs: one record per entry, same name, time and fields -------------------------------------
    logs = receiver.logs()
    assert len(logs) == len(entries)
    by_id = {rec["attributes"]["event.id"]: rec for rec in logs}
    for entry in entries:
        rec = by_id[entry["event.id"]]
        assert rec["event_name"] == entry["event.name"]
        assert rec["time"] == entry["time_unix_nano"]
        assert rec["attributes"]["gen_ai.session.id"] == entry["gen_ai.session.id"]
        assert rec["severity_text"] in ("INFO", "WARN", "ERROR")
    resource = logs[0]["resource"]
    assert resource["service.name"] == "agent-collector" and resource["service.version"]
    assert resource["host.name"] == entries[0]["host.name"] and resource["user.id"] == entries[0]["user.id"]
    # capture is off in the fixture: hashes and lengths only
    assert not any("gen_ai.input.messages" in r["attributes"] for r in logs)
    assert any("gen_ai.input.messages.hmac" in r["attributes"] for r in logs)
    assert "echo hi" not in json.dumps([r["attributes"] for r in logs])

    # -- traces: one per turn, the GenAI span tree, times from the entries ---------------------------
    spans = receiver.spans()
    roots = [s for s in spans if s["parent_id"] is None]
    assert sorted(r["attributes"]["gen_ai.turn.id"] for r in roots) == sorted(expected["turns"])
    assert len({s["span_id"] for s in spans}) == len(spans)
    for root in roots:
        assert root["name"] == "invoke_agent claude-code" and root["kind"] == "INTERNAL"
        assert root["attributes"]["gen_ai.operation.name"] == "invoke_agent"
        assert root["attributes"]["gen_ai.conversation.id"] == expected["sessions"][0]
        assert root["attributes"]["gen_ai.provider.name"] == "anthropic"
        assert not any(k.startswith("gen_ai.usage.") for k in root["attributes"])
        kids = children(spans, root)
        assert sorted(k["name"].split()[0] for k in kids) == ["chat", "chat", "execute_tool"]
        turn_entries = [e for e in entries if e.get("gen_ai.turn.id") == root["attributes"]["gen_ai.turn.id"]]
        prompt = next(e for e in turn_entries if e["event.name"] == "user.prompt")
        assert root["start"] == prompt["time_unix_nano"]
        for kid in kids:
            assert kid["trace_id"] == root["trace_id"]
            assert root["start"] <= kid["start"] <= kid["end"] <= root["end"]
            if kid["name"].startswith("chat"):
                assert kid["kind"] == "CLIENT" and kid["name"] == "chat claude-sonnet-4-5"
                resp = next(
                    e
                    for e in turn_entries
                    if e.get("gen_ai.response.id") == kid["attributes"]["gen_ai.response.id"]
                )
                req = next(
                    e
                    for e in turn_entries
                    if e["event.name"] == "llm.request"
                    and e["gen_ai.request.id"] == resp["gen_ai.request.id"]
                )  # noqa: E501
                assert (kid["start"], kid["end"]) == (req["time_unix_nano"], resp["time_unix_nano"])
                assert kid["attributes"]["gen_ai.request.model"] == "claude-sonnet-4-5"
                assert kid["attributes"]["gen_ai.provider.name"] == "anthropic"
            else:
                call_id = kid["attributes"]["gen_ai.tool.call.id"]
                assert kid["kind"] == "INTERNAL"
                assert kid["name"] == f"execute_tool {expected['tools'][call_id]['name']}"
                call = next(e for e in turn_entries if e["event.name"] == "tool.call")
                result = next(e for e in turn_entries if e["event.name"] == "tool.result")
                assert (kid["start"], kid["end"]) == (call["time_unix_nano"], result["time_unix_nano"])
                assert kid["attributes"]["gen_ai.tool.name"] == expected["tools"][call_id]["name"]

    # token sums over ALL spans equal the model server's totals (no double counting on parents)
    def total(key: str) -> int:
        return sum(int(s["attributes"].get(key, 0)) for s in spans)

    assert total("gen_ai.usage.input_tokens") == sum(t[0] * n for t, n in truth.items())
    assert total("gen_ai.usage.output_tokens") == sum(t[1] * n for t, n in truth.items())
    assert total("gen_ai.usage.cache_read.input_tokens") == sum(t[2] * n for t, n in truth.items())
    assert total("gen_ai.usage.cache_creation.input_tokens") == sum(t[3] * n for t, n in truth.items())

    # -- metrics ------------------------------------------------------------------------------------
    points = receiver.latest_metric_points()
    usage = [p for p in points if p["name"] == "gen_ai.client.token.usage"]
    assert {p["unit"] for p in usage} == {"{token}"} and all(p["kind"] == "histogram" for p in usage)
    assert all(p["bounds"] == list(map(float, TOKEN_BUCKETS)) for p in usage)
    sums: Counter[str] = Counter()
    for p in usage:
        assert p["attributes"]["gen_ai.agent.name"] == "claude-code"
        assert p["attributes"]["gen_ai.provider.name"] == "anthropic"
        assert p["attributes"]["gen_ai.request.model"] == "claude-sonnet-4-5"
        sums[p["attributes"]["gen_ai.token.type"]] += int(p["sum"])
    assert sums["input"] == sum(t[0] * n for t, n in truth.items())
    assert sums["output"] == sum(t[1] * n for t, n in truth.items())
    assert sum(p["count"] for p in usage if p["attributes"]["gen_ai.token.type"] == "input") == sum(
        truth.values()
    )

    def counter(name: str) -> dict[tuple[Any, ...], int]:
        return {tuple(sorted(p["attributes"].items())): p["value"] for p in points if p["name"] == name}

    assert sum(counter("agent_collector.turns").values()) == len(expected["turns"])
    assert sum(counter("agent_collector.sessions").values()) == expected["counts"]["session.start"]
    tools = counter("agent_collector.tool.calls")
    want = Counter((t["name"], t["status"]) for t in expected["tools"].values())
    got: Counter[tuple[str, str]] = Counter()
    for attrs, value in tools.items():
        d = dict(attrs)
        got[(d["gen_ai.tool.name"], d["tool.result.status"])] += value
    assert got == want
    durations = [p for p in points if p["name"] == "gen_ai.client.operation.duration"]
    assert all(p["bounds"] == list(DURATION_BUCKETS) and p["unit"] == "s" for p in durations)


def test_signals_can_be_switched_off_and_backends_multiplied(
    fixture_entries: dict[str, list[dict[str, Any]]], receiver: OtlpReceiver, tmp_path: Path
) -> None:
    second = OtlpReceiver().start()
    try:
        config = {
            "signals": ["traces"],
            "backends": [{"name": "second", "endpoint": second.endpoint, "signals": ["logs"]}],
        }
        queues = export_all(fixture_entries["tool_then_answer"], receiver.endpoint, tmp_path, **config)
        assert sorted(q.name for q in queues) == ["otlp-default-traces", "otlp-second-logs"]
        assert receiver.spans() and not receiver.logs() and not receiver.metric_points()
        assert second.logs() and not second.spans()
    finally:
        second.stop()


def test_replay_after_restart_sends_identical_ids(
    fixture_entries: dict[str, list[dict[str, Any]]], receiver: OtlpReceiver, tmp_path: Path
) -> None:
    entries = fixture_entries["tool_then_answer"]
    export_all(entries, receiver.endpoint, tmp_path / "a", signals=["traces"])
    first = {(s["trace_id"], s["span_id"], s["start"], s["end"], s["name"]) for s in receiver.spans()}
    receiver.received.traces.clear()
    export_all(entries, receiver.endpoint, tmp_path / "b", signals=["traces"])  # a fresh process, same input
    second = {(s["trace_id"], s["span_id"], s["start"], s["end"], s["name"]) for s in receiver.spans()}
    assert first == second and len(first) == 4


def test_gzip_and_headers_from_the_environment(
    fixture_entries: dict[str, list[dict[str, Any]]], receiver: OtlpReceiver, tmp_path: Path
) -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=s3cr%20t,x-team=ai",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_TRACES_EXPORTER": "none",
    }
    exporters = build_otlp_exporters({}, env, make_paths(tmp_path), options=FAST)
    assert [e.name for e in exporters] == ["otlp-default-logs"]
    exporters[0].export(fixture_entries["tool_then_answer"])
    assert isinstance(exporters[0], QueuedExporter) and exporters[0].flush(20)
    exporters[0].shutdown()
    headers = {k.lower(): v for k, v in receiver.received.headers[0].items()}
    assert headers["x-api-key"] == "s3cr t" and headers["x-team"] == "ai"
    assert headers["content-encoding"] == "gzip" and headers["content-type"] == "application/x-protobuf"
    assert len(receiver.logs()) == len(fixture_entries["tool_then_answer"])


def test_captured_content_reaches_logs_and_spans_when_the_policy_allows(
    receiver: OtlpReceiver, tmp_path: Path
) -> None:
    base = {"gen_ai.agent.type": "claude-code", "gen_ai.session.id": "s", "gen_ai.turn.id": "t"}
    messages = [{"role": "user", "parts": [{"type": "text", "content": "run echo hi"}]}]
    entries = [
        {
            **base,
            "event.name": "user.prompt",
            "event.id": "1" * 32,
            "time_unix_nano": 10**18,
            "gen_ai.input.messages": messages,
        },  # noqa: E501
        {**base, "event.name": "session.end", "event.id": "2" * 32, "time_unix_nano": 10**18 + 5},
    ]
    export_all(entries, receiver.endpoint, tmp_path, signals=["logs", "traces"])
    root = receiver.spans()[0]
    assert json.loads(root["attributes"]["gen_ai.input.messages"]) == messages
    prompt_log = next(r for r in receiver.logs() if r["event_name"] == "user.prompt")
    assert json.loads(prompt_log["attributes"]["gen_ai.input.messages"]) == messages
