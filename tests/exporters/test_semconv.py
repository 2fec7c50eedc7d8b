"""``OTEL_SEMCONV_STABILITY_OPT_IN``: a real Claude Code session with a subagent, exported under each value to the
test receiver (the real OTLP/HTTP protobuf, decoded by ``opentelemetry-proto``), and what arrives compared to the
conventions' own lists: the released names (semantic-conventions v1.41.0) by default, the latest ones of
semantic-conventions-genai (its migration guide, ``docs/gen-ai/non-normative/migration.md``, and
``docs/gen-ai/gen-ai-token-metrics.md``) under ``gen_ai_latest_experimental``, both under ``.../dup``. The token
totals are the model server's own records of the session."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, collect, make_paths, prepare_fixture, usage_tuple
from support.otlp_receiver import OtlpReceiver

from collector.exporters.otlp import build_otlp_exporters
from collector.exporters.queue import QueuedExporter, QueueOptions
from collector.exporters.semconv import DEFAULT, Semconv, from_env

CASE = FIXTURES / "claude-code" / "subagent"
FAST = QueueOptions(backoff_initial=0.05, backoff_max=0.2, tick_interval=0.05, drain_timeout=5.0)

# the conventions' lists, as their documents name them
RELEASED_METRICS = {"gen_ai.client.token.usage": "histogram", "gen_ai.client.operation.duration": "histogram"}
LATEST_METRICS = {
    "gen_ai.client.inference.usage.input_tokens": "sum",
    "gen_ai.client.inference.usage.output_tokens": "sum",
    "gen_ai.client.inference.usage.cache_read.input_tokens": "sum",
    "gen_ai.client.inference.usage.cache_write.input_tokens": "sum",
    "gen_ai.client.inference.usage.reasoning.output_tokens": "sum",
    "gen_ai.client.inference.operation.input_tokens": "histogram",
    "gen_ai.client.inference.operation.output_tokens": "histogram",
    "gen_ai.client.inference.duration": "histogram",
    "gen_ai.execute_tool.duration": "histogram",
}
REQUIRED = {  # the attributes each latest instrument requires
    "gen_ai.client.inference.usage.": {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.token.modality"},
    "gen_ai.client.inference.operation.": {"gen_ai.operation.name", "gen_ai.provider.name"},
    "gen_ai.client.inference.duration": {"gen_ai.operation.name", "gen_ai.provider.name"},
    "gen_ai.execute_tool.duration": {"gen_ai.operation.name", "gen_ai.tool.name"},
}
OLD, NEW = "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_write.input_tokens"


@pytest.mark.parametrize(("value", "expected"), [
    (None, DEFAULT), ("", DEFAULT), ("http", DEFAULT), ("gen_ai_latest", DEFAULT),
    ("gen_ai_latest_experimental", Semconv(released=False, latest=True)),
    (" http , GEN_AI_LATEST_EXPERIMENTAL ", Semconv(released=False, latest=True)),
    ("gen_ai_latest_experimental/dup", Semconv(released=True, latest=True)),
    ("gen_ai_latest_experimental,gen_ai_latest_experimental/dup", Semconv(released=True, latest=True)),
    ("gen_ai_latest_experimental," + "x" * 5000, DEFAULT), (7, DEFAULT),
])
def test_the_switch_is_read_like_the_convention_says(value: Any, expected: Semconv) -> None:
    assert from_env(value) == expected


@pytest.fixture(scope="module")
def entries(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return collect(prepare_fixture(CASE, tmp_path_factory.mktemp("semconv")))


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver().start()
    yield r
    r.stop()


def _export(entries: list[dict[str, Any]], receiver: OtlpReceiver, tmp: Path, value: str | None) -> None:
    env = {"OTEL_SEMCONV_STABILITY_OPT_IN": value} if value is not None else {}
    exporters = build_otlp_exporters({"endpoint": receiver.endpoint, "turn_grace": 0, "timeout": 2}, env,
                                     make_paths(tmp), options=FAST)
    for exporter in exporters:
        exporter.export(entries)
    for exporter in exporters:
        assert isinstance(exporter, QueuedExporter) and exporter.flush(20), exporter.stats()
        assert exporter.stats()["inner"]["semconv"] == from_env(value).name  # what `status` shows
        exporter.shutdown()


def _served() -> dict[str, int]:
    lines = [json.loads(x) for x in (CASE / "response_usage.jsonl").read_text().splitlines() if x.strip()]
    tuples = [usage_tuple(d["api"], d["usage"]) for d in lines if d.get("kind") == "response_usage"]
    return {"input": sum(t[0] for t in tuples), "output": sum(t[1] for t in tuples),
            "cache_read": sum(t[2] for t in tuples), "cache_write": sum(t[3] for t in tuples), "calls": len(tuples)}


@pytest.mark.parametrize("value", [None, "gen_ai_latest_experimental", "gen_ai_latest_experimental/dup"])
def test_metrics_under_each_value(value: str | None, entries: list[dict[str, Any]], receiver: OtlpReceiver,
                                  tmp_path: Path) -> None:
    mode = from_env(value)
    _export(entries, receiver, tmp_path, value)
    points = receiver.latest_metric_points()
    kinds = {p["name"]: p["kind"] for p in points if p["name"].startswith("gen_ai.")}
    expected = {**(RELEASED_METRICS if mode.released else {}), **(LATEST_METRICS if mode.latest else {})}
    assert kinds == expected
    served = _served()
    if mode.released:
        usage = [p for p in points if p["name"] == "gen_ai.client.token.usage"]
        assert sum(p["sum"] for p in usage if p["attributes"]["gen_ai.token.type"] == "input") == served["input"]
    if not mode.latest:
        return
    for prefix, required in REQUIRED.items():
        for point in (p for p in points if p["name"].startswith(prefix)):
            assert required <= set(point["attributes"]), (point["name"], point["attributes"])
            assert "gen_ai.token.type" not in point["attributes"], "the latest instruments dropped it"

    def counter(category: str) -> int:
        return sum(p["value"] for p in points if p["name"] == f"gen_ai.client.inference.usage.{category}")

    assert counter("input_tokens") == served["input"] and counter("output_tokens") == served["output"]
    assert counter("cache_read.input_tokens") == served["cache_read"]
    assert counter("cache_write.input_tokens") == served["cache_write"]
    assert counter("reasoning.output_tokens") == 0, "the Anthropic API reports no reasoning tokens apart"
    assert {p["attributes"]["gen_ai.token.modality"] for p in points if ".usage." in p["name"]} == {"unknown"}
    operation = [p for p in points if p["name"] == "gen_ai.client.inference.operation.input_tokens"]
    assert sum(p["count"] for p in operation) == served["calls"]
    assert sum(p["sum"] for p in operation) == served["input"]
    timed = [e for e in entries if e["event.name"] == "tool.result" and "duration_ms" in e]
    tools = [p for p in points if p["name"] == "gen_ai.execute_tool.duration"]
    fixture_tools = json.loads((CASE / "expected.json").read_text())["tools"]
    assert sum(p["count"] for p in tools) == len(timed) == len(fixture_tools)
    assert {p["attributes"]["gen_ai.tool.name"] for p in tools} == {e["gen_ai.tool.name"] for e in timed}
    assert sum(p["sum"] for p in tools) == pytest.approx(sum(e["duration_ms"] for e in timed) / 1000)


@pytest.mark.parametrize("value", [None, "gen_ai_latest_experimental", "gen_ai_latest_experimental/dup"])
def test_spans_and_logs_under_each_value(value: str | None, entries: list[dict[str, Any]], receiver: OtlpReceiver,
                                         tmp_path: Path) -> None:
    mode = from_env(value)
    _export(entries, receiver, tmp_path, value)
    chats = [s for s in receiver.spans() if s["name"].startswith("chat ")]
    served = _served()
    assert len(chats) == served["calls"]
    for name, wanted in ((OLD, mode.released), (NEW, mode.latest)):
        assert all((name in s["attributes"]) == wanted for s in chats), name
        if wanted:
            assert sum(s["attributes"][name] for s in chats) == served["cache_write"]
    roots = [s for s in receiver.spans() if s["kind"] == "INTERNAL" and s["name"].startswith("invoke_agent")]
    assert roots and any(s["parent_id"] is None for s in roots)
    top = [s for s in roots if s["parent_id"] is None]
    assert all(("gen_ai.provider.name" in s["attributes"]) == mode.released for s in top), \
        "the latest conventions took provider.name off the internal invoke_agent span"
    responses = [r for r in receiver.logs() if r["body"] == "llm.response"]
    assert len(responses) == served["calls"]
    for name, wanted in ((OLD, mode.released), (NEW, mode.latest)):
        assert all((name in r["attributes"]) == wanted for r in responses), name
