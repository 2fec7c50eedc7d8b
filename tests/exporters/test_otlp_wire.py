"""The hand-written OTLP encoder writes what the SDK exporters write: for real entries of five agents'
fixture sessions (plus attribute values of every kind), the log and trace requests are the same bytes as
the SDK's encoders give for the same records, and the metric requests decode to the same messages (times
aside: a cumulative point carries its own start and collection time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.metrics.v1.metrics_pb2 import ResourceMetrics
from support import FIXTURES, collect, prepare_fixture
from support.otlp_sdk_reference import sdk_logs, sdk_metrics, sdk_spans

from collector.exporters import otlp_wire as wire
from collector.exporters.otlp_common import ResourceCache
from collector.exporters.otlp_logs import LogEncoder
from collector.exporters.otlp_metrics import OtlpMetricsExporter
from collector.exporters.otlp_traces import OtlpTracesExporter
from collector.exporters.trace_builder import SpanData
from collector.state.checkpoints import CheckpointStore, KeyState

CASES = [("claude-code", "subagent"), ("claude-code", "api_error"), ("codex", "failing_command"),
         ("gemini-cli", "two_tools"), ("qwen-code", "interrupted_tool"), ("opencode", "two_turns_resume")]
ODD_VALUES: dict[str, Any] = {
    "test.list": ["a", "ü", ""], "test.bool": False, "test.true": True, "test.float": -0.0, "test.pi": 3.25,
    "test.negative": -(2**63), "test.max": 2**63 - 1, "test.zero": 0, "test.empty": "", "test.emoji": "😀 ok",
    "test.nested": {"b": [1, {"c": None}], "a": "x"}, "test.mixed": [1, "a"], "test.none": None,
}


class Capture:
    endpoint = "memory"

    def __init__(self, on_send: Any = None) -> None:
        self.bodies: list[bytes] = []
        self.on_send = on_send

    def send(self, body: bytes, what: str) -> None:
        if self.on_send is not None:
            self.on_send()
        self.bodies.append(body)

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def entries(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for agent, case in CASES:
        got = collect(prepare_fixture(FIXTURES / agent / case, tmp_path_factory.mktemp(f"{agent}-{case}")))
        assert got, f"{agent}/{case} gave entries"
        out += got
    for i, entry in enumerate(out[::7]):
        entry.update(ODD_VALUES)
        entry["host.name"] = f"other-host-{i % 2}"  # three resources in one request
    return out


def test_log_requests_are_the_sdk_bytes(entries: list[dict[str, Any]]) -> None:
    resources = ResourceCache({"deployment.environment": "test"})
    encoder = LogEncoder(resources)
    body, count, poison = encoder.request(entries)
    assert count == len(entries) and not poison
    assert body == sdk_logs(entries, resources)
    again, _, _ = encoder.request(entries)  # from the memo this time
    assert again == body


@pytest.mark.parametrize("upstream", [False, True])
def test_trace_requests_are_the_sdk_bytes(entries: list[dict[str, Any]], tmp_path: Path, upstream: bool) -> None:
    """Also with the turns linked to an upstream span: the SDK's encoder marks that parent as remote."""
    if upstream:
        entries = [{**e, "upstream.trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
                    "upstream.parent_span_id": "00f067aa0ba902b7"} for e in entries]
    resources = ResourceCache()
    sent: list[tuple[tuple[str, str], SpanData]] = []
    exporter: OtlpTracesExporter

    def snapshot() -> None:
        sent.extend((key, span) for key, spans in exporter.outbox for span in spans)

    capture = Capture(snapshot)
    state = KeyState(CheckpointStore(tmp_path / "checkpoints.sqlite"), "exporter.t")
    exporter = OtlpTracesExporter("t", capture, resources, state, idle_timeout_s=0, grace_s=0)
    exporter.export(entries)
    exporter.flush_all()
    assert len(sent) >= 30 and any(s.events for _, s in sent) and any(s.status == "ERROR" for _, s in sent)
    assert any(s.parent_remote for _, s in sent) == upstream
    assert b"".join(capture.bodies) != b""
    offset = 0
    for body in capture.bodies:  # one request per send: compare each with the SDK's for its spans
        spans = sent[offset: offset + _count_spans(body)]
        offset += len(spans)
        assert body == sdk_spans(spans, resources)
    assert offset == len(sent)


def _count_spans(body: bytes) -> int:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest.FromString(body)
    return sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)


def _normalised(resource_metrics: ResourceMetrics) -> ResourceMetrics:
    """Times zeroed, metrics by name and points by attributes (their order carries no meaning)."""
    copy = ResourceMetrics()
    copy.CopyFrom(resource_metrics)
    for scope in copy.scope_metrics:
        for metric in scope.metrics:
            data = metric.histogram if metric.HasField("histogram") else metric.sum
            for point in data.data_points:
                point.start_time_unix_nano = point.time_unix_nano = 0
            ordered = sorted(data.data_points, key=lambda p: p.SerializeToString())
            del data.data_points[:]
            data.data_points.extend(ordered)
        ordered_metrics = sorted(scope.metrics, key=lambda m: m.name)
        del scope.metrics[:]
        scope.metrics.extend(ordered_metrics)
    return copy


def test_metric_requests_decode_to_the_sdk_messages(entries: list[dict[str, Any]]) -> None:
    resources = ResourceCache()
    capture = Capture()
    exporter = OtlpMetricsExporter("m", capture, resources)
    half = len(entries) // 2
    exporter.export(entries[:half])
    exporter.export(entries[half:])  # cumulative: the second request holds everything
    ours = ExportMetricsServiceRequest.FromString(capture.bodies[-1])
    theirs = [ExportMetricsServiceRequest.FromString(b).resource_metrics[0] for b in sdk_metrics(entries, resources)]
    assert len(ours.resource_metrics) == len(theirs) == 3
    names = {m.name for r in ours.resource_metrics for s in r.scope_metrics for m in s.metrics}
    assert {"gen_ai.client.token.usage", "agent_collector.tool.calls", "agent_collector.turns"} <= names
    for mine, reference in zip(ours.resource_metrics, theirs, strict=True):
        assert _normalised(mine) == _normalised(reference)


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, "\ud800 lone surrogate", object()])
def test_values_protobuf_cannot_carry_are_refused(value: Any) -> None:
    with pytest.raises(wire.Unencodable):
        wire.any_value(value)


def test_times_outside_fixed64_are_refused() -> None:
    with pytest.raises(wire.Unencodable):
        wire.fixed64(1, -1)
    with pytest.raises(wire.Unencodable):
        wire.fixed64(1, 2**64)
    assert wire.fixed64(1, 0) == b""
