"""An OTLP/HTTP request body to the OTLP/JSON form, and the answers the OTLP specification asks for.

Both encodings end in the same form, OTLP/JSON (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding):
camelCase field names, trace and span ids in hex, 64-bit integers as they came (strings or numbers),
``bytesValue`` in base64. A protobuf body is parsed by ``opentelemetry-proto`` and turned into that form
(``MessageToDict``, then the ids from base64 to hex). Everything is checked once here: the media type
(415), the content coding (``gzip`` or ``identity``, else 415), the size after decompression (413, so a
gzip bomb stops at the cap), the body (400 when it does not decode or has not the request's shape).
"""

from __future__ import annotations

import base64
import binascii
import zlib
from dataclasses import dataclass
from typing import Any

import orjson

SIGNALS = {"/v1/logs": "logs", "/v1/traces": "traces", "/v1/metrics": "metrics"}
RESOURCES = {"logs": "resourceLogs", "traces": "resourceSpans", "metrics": "resourceMetrics"}
SCOPES = {"logs": "scopeLogs", "traces": "scopeSpans", "metrics": "scopeMetrics"}
ITEMS = {"logs": "logRecords", "traces": "spans", "metrics": "metrics"}
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_ID_KEYS = ("traceId", "spanId", "parentSpanId")
_POINT_KINDS = ("gauge", "sum", "histogram", "exponentialHistogram", "summary")
# partial_success's counter of each signal (ExportLogsPartialSuccess.rejected_log_records, ...)
_REJECTED = {"logs": "rejectedLogRecords", "traces": "rejectedSpans", "metrics": "rejectedDataPoints"}


class OtlpRefused(Exception):
    """Answered with ``status`` and a ``google.rpc.Status`` carrying the message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Encoding:
    media: str  # PROTOBUF or JSON: also the answer's content type

    @classmethod
    def of(cls, content_type: str | None) -> Encoding:
        media = (content_type or "").split(";", 1)[0].strip().lower()
        if media not in (PROTOBUF, JSON):
            raise OtlpRefused(415, f"Content-Type must be {PROTOBUF} or {JSON}, not {media or 'absent'}")
        return cls(media)


def decode_request(signal: str, encoding: Encoding, content_encoding: str | None, body: bytes,
                   cap: int) -> dict[str, Any]:
    """The export request of ``signal`` in OTLP/JSON form, or OtlpRefused."""
    data = inflate(body, content_encoding, cap)
    request = _from_protobuf(signal, data) if encoding.media == PROTOBUF else _from_json(data)
    _check_shape(signal, request)
    return request


def inflate(body: bytes, content_encoding: str | None, cap: int) -> bytes:
    """The body with its content coding undone, never more than ``cap`` bytes (413 beyond)."""
    coding = (content_encoding or "identity").strip().lower()
    if coding == "identity":
        return body
    if coding != "gzip":
        raise OtlpRefused(415, f"Content-Encoding {coding!r} is not supported (gzip or identity)")
    out = bytearray()
    rest = body
    while rest:  # a gzip stream may hold several members
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out += inflater.decompress(rest, cap + 1 - len(out))
        except zlib.error as exc:
            raise OtlpRefused(400, f"the gzip body does not decompress: {exc}") from None
        if len(out) > cap:
            raise OtlpRefused(413, f"the body is over the {cap}-byte cap once decompressed")
        if not inflater.eof:
            raise OtlpRefused(400, "the gzip body is truncated")
        rest = inflater.unused_data
    return bytes(out)


def _from_json(data: bytes) -> dict[str, Any]:
    try:
        request = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise OtlpRefused(400, f"the body is not JSON: {exc}") from None
    if not isinstance(request, dict):
        raise OtlpRefused(400, "the body must be a JSON object (an export request)")
    return request


def _from_protobuf(signal: str, data: bytes) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.message import DecodeError

    message = _message(signal)()
    try:
        message.ParseFromString(data)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise OtlpRefused(400, f"the body is not an OTLP {signal} export request: {exc}") from None
    request: dict[str, Any] = MessageToDict(message, use_integers_for_enums=True)
    for item in _items(signal, request):
        _hex_ids(item)
        for link in item.get("links", ()):
            _hex_ids(link)
        for point in _points(item):
            for exemplar in point.get("exemplars", ()):
                _hex_ids(exemplar)
    return request


def _message(signal: str) -> Any:
    if signal == "logs":
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
        return ExportLogsServiceRequest
    if signal == "traces":
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
        return ExportTraceServiceRequest
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    return ExportMetricsServiceRequest


def _hex_ids(item: dict[str, Any]) -> None:
    for key in _ID_KEYS:
        value = item.get(key)
        if isinstance(value, str):
            try:
                item[key] = base64.b64decode(value, validate=True).hex()
            except (binascii.Error, ValueError):
                raise OtlpRefused(400, f"{key} is not base64") from None


def _items(signal: str, request: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for resource in request.get(RESOURCES[signal], ())
            for scope in resource.get(SCOPES[signal], ()) for item in scope.get(ITEMS[signal], ())]


def _points(metric: dict[str, Any]) -> list[dict[str, Any]]:
    for kind in _POINT_KINDS:
        body = metric.get(kind)
        if isinstance(body, dict):
            points = body.get("dataPoints")
            return [p for p in points if isinstance(p, dict)] if isinstance(points, list) else []
    return []


def _check_shape(signal: str, request: dict[str, Any]) -> None:
    """The lists the request's records hang on are lists of objects (what the records themselves hold
    is checked where they are read, ``collector.sources.otlp_records``)."""
    resources = request.get(RESOURCES[signal], [])
    if not isinstance(resources, list) or not all(isinstance(r, dict) for r in resources):
        raise OtlpRefused(400, f"{RESOURCES[signal]} must be a list of objects")
    for resource in resources:
        scopes = resource.get(SCOPES[signal], [])
        if not isinstance(scopes, list) or not all(isinstance(s, dict) for s in scopes):
            raise OtlpRefused(400, f"{SCOPES[signal]} must be a list of objects")
        for scope in scopes:
            items = scope.get(ITEMS[signal], [])
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                raise OtlpRefused(400, f"{ITEMS[signal]} must be a list of objects")


def count_records(signal: str, resource: dict[str, Any]) -> int:
    """Log records, spans or metric data points under one resource (what partial_success counts)."""
    items = [i for s in resource.get(SCOPES[signal], ()) for i in s.get(ITEMS[signal], ())]
    return sum(len(_points(i)) for i in items) if signal == "metrics" else len(items)


def service_name(resource: dict[str, Any]) -> str | None:
    """The resource's ``service.name`` attribute, when it is a string."""
    inner = resource.get("resource")
    attributes = inner.get("attributes") if isinstance(inner, dict) else None
    for kv in attributes if isinstance(attributes, list) else ():
        if isinstance(kv, dict) and kv.get("key") == "service.name":
            value = kv.get("value")
            name = value.get("stringValue") if isinstance(value, dict) else None
            return name if isinstance(name, str) else None
    return None


def success(signal: str, encoding: Encoding, rejected: int = 0, message: str = "") -> bytes:
    """The Export<Signal>ServiceResponse: empty, or with partial_success naming what was left out."""
    if encoding.media == JSON:
        if not rejected:
            return b"{}"
        return orjson.dumps({"partialSuccess": {_REJECTED[signal]: str(rejected), "errorMessage": message}})
    if not rejected:
        return b""
    text = message.encode()
    partial = b"\x08" + _varint(rejected) + b"\x12" + _varint(len(text)) + text
    return b"\x0a" + _varint(len(partial)) + partial  # field 1: partial_success


def status_body(encoding: Encoding | None, status: int, message: str) -> tuple[bytes, str]:
    """The google.rpc.Status the specification asks 4xx/5xx answers to carry, and its content type."""
    code = {400: 3, 413: 8, 415: 3, 503: 14}.get(status, 13)  # INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNAVAILABLE
    if encoding is not None and encoding.media == JSON:
        return orjson.dumps({"code": code, "message": message}), JSON
    text = message.encode()
    return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text, PROTOBUF


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)
