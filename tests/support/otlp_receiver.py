"""A small OTLP/HTTP receiver for tests: decodes the real protobuf requests with ``opentelemetry-proto``.

Bind 127.0.0.1 on a free port; ``stop()`` and ``start()`` again on the same port to simulate an outage;
``fail_with = 503`` to answer errors (``retry_after`` adds that header). OTLP/JSON bodies
(``Content-Type: application/json``, hex ids) are decoded too, and kept as they came in ``json_bodies``.
``spans()``, ``logs()``, ``metric_points()`` flatten what arrived (a metric point with its
``start_time_unix_nano`` as ``start`` and ``time_unix_nano`` as ``time``).
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
import time
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

_MESSAGES: dict[str, Any] = {
    "/v1/traces": ExportTraceServiceRequest,
    "/v1/logs": ExportLogsServiceRequest,
    "/v1/metrics": ExportMetricsServiceRequest,
}
SPAN_KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


def any_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind)


def attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in kvs}


_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _base64_ids(value: Any) -> Any:
    """OTLP/JSON's hex ids as protobuf's JSON mapping wants them (base64), at any depth."""
    if isinstance(value, list):
        return [_base64_ids(v) for v in value]
    if not isinstance(value, dict):
        return value
    return {k: base64.b64encode(bytes.fromhex(v)).decode() if k in _ID_KEYS and isinstance(v, str)
            else _base64_ids(v) for k, v in value.items()}


@dataclass
class Received:
    traces: list[ExportTraceServiceRequest] = field(default_factory=list)
    logs: list[ExportLogsServiceRequest] = field(default_factory=list)
    metrics: list[ExportMetricsServiceRequest] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    json_bodies: list[Any] = field(default_factory=list)  # OTLP/JSON requests as they came


class OtlpReceiver:
    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.received = Received()
        self.fail_with: int | None = None
        self.retry_after: str | None = None  # sent as Retry-After with a failure
        self.delay_s = 0.0
        self.requests = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                status = receiver._handle(self.path, body, dict(self.headers.items()))
                self.send_response(status)
                if status != 200 and receiver.retry_after is not None:
                    self.send_header("Retry-After", receiver.retry_after)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _handle(self, path: str, body: bytes, headers: dict[str, str]) -> int:
        if self.delay_s:
            time.sleep(self.delay_s)
        with self._lock:
            self.requests += 1
            if self.fail_with is not None:
                return self.fail_with
            message_type = _MESSAGES.get(path)
            if message_type is None:
                return 404
            message = message_type()
            if "json" in {k.lower(): v for k, v in headers.items()}.get("content-type", ""):
                self.received.json_bodies.append(json.loads(body))
                json_format.ParseDict(_base64_ids(json.loads(body)), message)  # OTLP/JSON: ids in hex
            else:
                message.ParseFromString(body)
            self.received.headers.append(headers)
            if path == "/v1/traces":
                self.received.traces.append(message)
            elif path == "/v1/logs":
                self.received.logs.append(message)
            else:
                self.received.metrics.append(message)
            return 200

    # -- flattened views -----------------------------------------------------------------------------
    def spans(self) -> list[dict[str, Any]]:
        out = []
        with self._lock:
            requests = list(self.received.traces)
        for request in requests:
            for rs in request.resource_spans:
                resource = attributes(rs.resource.attributes)
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        out.append(
                            {
                                "name": span.name,
                                "kind": SPAN_KINDS[span.kind],
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_id": span.parent_span_id.hex() or None,
                                "start": span.start_time_unix_nano,
                                "end": span.end_time_unix_nano,
                                "attributes": attributes(span.attributes),
                                "status": span.status.code,
                                "events": [
                                    (e.name, e.time_unix_nano, attributes(e.attributes)) for e in span.events
                                ],
                                "resource": resource,
                                "scope": ss.scope.name,
                            }
                        )
        return out

    def logs(self) -> list[dict[str, Any]]:
        out = []
        with self._lock:
            requests = list(self.received.logs)
        for request in requests:
            for rl in request.resource_logs:
                resource = attributes(rl.resource.attributes)
                for sl in rl.scope_logs:
                    for record in sl.log_records:
                        out.append(
                            {
                                "event_name": record.event_name,
                                "time": record.time_unix_nano,
                                "observed_time": record.observed_time_unix_nano,
                                "severity_number": record.severity_number,
                                "severity_text": record.severity_text,
                                "body": any_value(record.body),
                                "attributes": attributes(record.attributes),
                                "resource": resource,
                            }
                        )
        return out

    def metric_points(self) -> list[dict[str, Any]]:
        """Every data point of every request (cumulative: the last request holds the totals)."""
        out = []
        with self._lock:
            requests = list(self.received.metrics)
        for index, request in enumerate(requests):
            for rm in request.resource_metrics:
                resource = attributes(rm.resource.attributes)
                for sm in rm.scope_metrics:
                    for metric in sm.metrics:
                        kind = metric.WhichOneof("data")
                        data = getattr(metric, kind)
                        for point in data.data_points:
                            item: dict[str, Any] = {
                                "request": index,
                                "name": metric.name,
                                "unit": metric.unit,
                                "kind": kind,
                                "attributes": attributes(point.attributes),
                                "resource": resource,
                                "start": point.start_time_unix_nano,
                                "time": point.time_unix_nano,
                            }
                            if kind == "histogram":
                                item.update(
                                    count=point.count,
                                    sum=point.sum,
                                    bounds=list(point.explicit_bounds),
                                    buckets=list(point.bucket_counts),
                                    temporality=data.aggregation_temporality,
                                )
                            else:
                                item["value"] = point.as_int if point.HasField("as_int") else point.as_double
                            out.append(item)
        return out

    def latest_metric_points(self) -> list[dict[str, Any]]:
        points = self.metric_points()
        if not points:
            return []
        last = max(p["request"] for p in points)
        return [p for p in points if p["request"] == last]
