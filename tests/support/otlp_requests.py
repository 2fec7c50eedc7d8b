"""OTLP export requests for tests, encoded by ``opentelemetry-proto`` (the real wire format)."""

from __future__ import annotations

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

TRACE_ID = "5b8efff798038103d269b633813fc60c"
SPAN_ID = "eee19b7ec3c1b174"


def _kv(key: str, value: str | int) -> KeyValue:
    any_value = AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=value)
    return KeyValue(key=key, value=any_value)


def logs_request(service: str, events: int, marker: str = "m") -> bytes:
    """``events`` Claude Code-like api_request log records of one resource named ``service``."""
    records = [LogRecord(time_unix_nano=1_796_000_000_000_000_000 + n,
                         body=AnyValue(string_value="claude_code.api_request"),
                         attributes=[_kv("event.name", "api_request"), _kv("output_tokens", 100 + n),
                                     _kv("marker", marker)],
                         trace_id=bytes.fromhex(TRACE_ID), span_id=bytes.fromhex(SPAN_ID))
               for n in range(events)]
    request = ExportLogsServiceRequest(resource_logs=[ResourceLogs(
        resource=Resource(attributes=[_kv("service.name", service)]),
        scope_logs=[ScopeLogs(log_records=records)])])
    return request.SerializeToString()
