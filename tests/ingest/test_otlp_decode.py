"""OTLP bodies to OTLP/JSON, and the answers: checked against ``opentelemetry-proto``'s own messages."""

from __future__ import annotations

import gzip

import pytest
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Exemplar,
    Metric,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from support.otlp_requests import SPAN_ID, TRACE_ID

from collector.ingest.otlp_decode import JSON, PROTOBUF, Encoding, OtlpRefused, decode_request, status_body, success
from collector.sources.otlp_records import records_of

PARENT = "00f067aa0ba902b7"
RESOURCE = Resource(attributes=[KeyValue(key="service.name", value=AnyValue(string_value="codex_exec"))])


def _trace() -> bytes:
    span = Span(trace_id=bytes.fromhex(TRACE_ID), span_id=bytes.fromhex(SPAN_ID),
                parent_span_id=bytes.fromhex(PARENT), name="handle_responses", kind=Span.SPAN_KIND_CLIENT,
                start_time_unix_nano=1796000000000000000, end_time_unix_nano=1796000001000000000,
                links=[Span.Link(trace_id=bytes.fromhex(TRACE_ID), span_id=bytes.fromhex(PARENT))],
                events=[Span.Event(name="response.completed", time_unix_nano=1796000000500000000,
                                   attributes=[KeyValue(key="n", value=AnyValue(int_value=3))])])
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=RESOURCE, scope_spans=[ScopeSpans(spans=[span])])]).SerializeToString()


def _metrics() -> bytes:
    point = NumberDataPoint(as_int=1234, time_unix_nano=1796000000000000000,
                            attributes=[KeyValue(key="type", value=AnyValue(string_value="output"))],
                            exemplars=[Exemplar(as_int=1, trace_id=bytes.fromhex(TRACE_ID),
                                                span_id=bytes.fromhex(SPAN_ID))])
    metric = Metric(name="codex.turn.token_usage", unit="{token}",
                    sum=Sum(data_points=[point], aggregation_temporality=1, is_monotonic=True))
    return ExportMetricsServiceRequest(resource_metrics=[ResourceMetrics(
        resource=RESOURCE, scope_metrics=[ScopeMetrics(metrics=[metric])])]).SerializeToString()


def test_a_protobuf_trace_comes_out_as_records_with_hex_ids() -> None:
    export = decode_request("traces", Encoding(PROTOBUF), None, _trace(), 1 << 20)
    [record] = list(records_of("traces", export))
    span = record["span"]
    assert (span["trace_id"], span["span_id"], span["parent_span_id"]) == (TRACE_ID, SPAN_ID, PARENT)
    assert (span["kind"], span["start_time_unix_nano"], span["end_time_unix_nano"]) == \
        (3, 1796000000000000000, 1796000001000000000)
    assert span["links"][0]["span_id"] == PARENT
    assert span["events"] == [{"name": "response.completed", "time_unix_nano": 1796000000500000000,
                               "attributes": {"n": 3}}]
    assert record["resource"]["attributes"] == {"service.name": "codex_exec"}


def test_a_protobuf_sum_makes_one_record_per_point_with_its_exemplar_ids_in_hex() -> None:
    gz = gzip.compress(_metrics()[:40]) + gzip.compress(_metrics()[40:])  # two gzip members
    export = decode_request("metrics", Encoding(PROTOBUF), "gzip", gz, 1 << 20)
    [record] = list(records_of("metrics", export))
    metric = record["metric"]
    assert (metric["name"], metric["unit"], metric["type"], metric["temporality"], metric["monotonic"]) == \
        ("codex.turn.token_usage", "{token}", "sum", 1, True)
    assert (metric["point"]["as_int"], metric["point"]["attributes"]) == (1234, {"type": "output"})
    assert metric["point"]["exemplars"][0]["trace_id"] == TRACE_ID


@pytest.mark.parametrize(("signal", "response"), [("traces", ExportTraceServiceResponse),
                                                  ("metrics", ExportMetricsServiceResponse)])
def test_partial_success_parses_as_the_real_response(signal: str, response: type) -> None:
    parsed = response.FromString(success(signal, Encoding(PROTOBUF), 7, "service.name not mapped: x"))
    rejected = parsed.partial_success.rejected_spans if signal == "traces" else \
        parsed.partial_success.rejected_data_points
    assert (rejected, parsed.partial_success.error_message) == (7, "service.name not mapped: x")
    assert response.FromString(success(signal, Encoding(PROTOBUF))).HasField("partial_success") is False


def test_the_refusal_body_is_a_google_rpc_status() -> None:
    body, media = status_body(Encoding(PROTOBUF), 413, "too large")
    assert media == PROTOBUF
    assert (Status.FromString(body).code, Status.FromString(body).message) == (8, "too large")
    assert status_body(Encoding(JSON), 400, "bad")[0] == b'{"code":3,"message":"bad"}'


@pytest.mark.parametrize(("media", "body", "status"), [
    (PROTOBUF, b"\x0a\xff\xff\xff\xff\x0f", 400),  # a length past the end
    (JSON, b'{"resourceSpans": {"not": "a list"}}', 400),
    (JSON, b'{"resourceSpans": [{"scopeSpans": [{"spans": ["x"]}]}]}', 400),
    (JSON, b"[]", 400),
])
def test_bodies_that_are_not_export_requests_are_refused(media: str, body: bytes, status: int) -> None:
    with pytest.raises(OtlpRefused) as refused:
        decode_request("traces", Encoding(media), None, body, 1 << 20)
    assert refused.value.status == status
