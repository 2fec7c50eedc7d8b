"""The lines an OpenTelemetry JS file exporter writes, made into the records of
``collector.sources.otlp_records`` (the same shape as the receiver's). Which agents write them, and the
public sources of the format, are in docs/otlp-receiver.md and the fixture's README.

Such an exporter appends one JSON object per line:

* a span: ``{resource: {attributes}, instrumentationScope, traceId, spanId, parentSpanId, name, kind,
  startTime, endTime, status, attributes, events, links}``, times as ``[seconds, nanoseconds]``;
* a log record: the SDK's record as ``JSON.stringify`` makes it: ``{hrTime, hrTimeObserved, spanContext:
  {traceId, spanId}, instrumentationScope, attributes, _body | body, severityNumber, severityText, ...}``;
* one metrics export: ``{resource, scopeMetrics: [{scope, metrics: [{descriptor: {name, description, unit},
  aggregationTemporality, dataPointType, isMonotonic, dataPoints: [{startTime, endTime, attributes, value}]}]}]}``.

Attributes there are plain objects already; a resource is ``{attributes}`` or the SDK's ``ResourceImpl``
fields (``_rawAttributes`` pairs). A line that is an OTLP/JSON export request is read as one.
"""

from __future__ import annotations

from typing import Any

from collector.sources.otlp_records import fields, records_of, signal_of_export

_JS_POINT_TYPES = {0: "histogram", 1: "exponential_histogram", 2: "gauge", 3: "sum"}  # sdk-metrics DataPointType
_JS_TEMPORALITY = {0: 1, 1: 2}  # sdk-metrics DELTA, CUMULATIVE -> OTLP AGGREGATION_TEMPORALITY_DELTA, _CUMULATIVE


def records_of_line(line: dict[str, Any]) -> list[dict[str, Any]]:
    """The records a line holds (none for a line of no known form)."""
    signal = signal_of_export(line)
    if signal is not None:
        return list(records_of(signal, line))
    if isinstance(line.get("scopeMetrics"), list):
        return _metrics(line)
    if line.get("type") == "span" or (isinstance(line.get("name"), str) and "spanId" in line):
        return [{"signal": "traces", "resource": _resource(line), "scope": _scope(line.get("instrumentationScope")),
                 "span": _span(line)}]
    if line.get("type") in (None, "log") and ("hrTime" in line or "_body" in line or "body" in line):
        return [{"signal": "logs", "resource": _resource(line), "scope": _scope(line.get("instrumentationScope")),
                 "log": _log(line)}]
    return []


def _span(line: dict[str, Any]) -> dict[str, Any]:
    parent = line.get("parentSpanContext")
    status = _obj(line.get("status"))
    return {
        "trace_id": _text(line.get("traceId")), "span_id": _text(line.get("spanId")),
        "parent_span_id": _text(line.get("parentSpanId")) or (_text(parent.get("spanId"))
                                                              if isinstance(parent, dict) else None),
        "trace_state": _text(line.get("traceState")), "name": _text(line.get("name")),
        "kind": _js_kind(line.get("kind")),
        "start_time_unix_nano": _hrtime(line.get("startTime")), "end_time_unix_nano": _hrtime(line.get("endTime")),
        "attributes": _plain(line.get("attributes")),
        "status": {"code": status.get("code") if isinstance(status.get("code"), int) else None,
                   "message": _text(status.get("message"))},
        "events": [{"name": _text(e.get("name")), "time_unix_nano": _hrtime(e.get("time")),
                    "attributes": _plain(e.get("attributes"))} for e in _dicts(line.get("events"))],
        "links": [_link(link) for link in _dicts(line.get("links"))],
    }


def _link(link: dict[str, Any]) -> dict[str, Any]:
    context = _obj(link.get("context"))
    return {"trace_id": _text(context.get("traceId")), "span_id": _text(context.get("spanId")),
            "attributes": _plain(link.get("attributes"))}


def _log(line: dict[str, Any]) -> dict[str, Any]:
    context = _obj(line.get("spanContext"))
    body = line.get("_body", line.get("body"))
    severity = line.get("severityNumber", line.get("_severityNumber"))
    return {
        "time_unix_nano": _hrtime(line.get("hrTime")), "observed_time_unix_nano": _hrtime(line.get("hrTimeObserved")),
        "severity_number": severity if isinstance(severity, int) and not isinstance(severity, bool) else None,
        "severity_text": _text(line.get("severityText", line.get("_severityText"))),
        "event_name": _text(line.get("eventName", line.get("_eventName"))),
        "body": body if isinstance(body, str | int | float | bool | list | dict) else None,
        "attributes": _plain(line.get("attributes")),
        "trace_id": _text(context.get("traceId")), "span_id": _text(context.get("spanId")),
        "flags": context.get("traceFlags") if isinstance(context.get("traceFlags"), int) else None,
    }


def _metrics(line: dict[str, Any]) -> list[dict[str, Any]]:
    resource = _resource(line)
    out = []
    for scope_part in _dicts(line.get("scopeMetrics")):
        scope = _scope(scope_part.get("scope"))
        for metric in _dicts(scope_part.get("metrics")):
            descriptor = _obj(metric.get("descriptor"))
            head = {"name": _text(descriptor.get("name")), "description": _text(descriptor.get("description")),
                    "unit": _text(descriptor.get("unit")),
                    "type": _JS_POINT_TYPES.get(metric.get("dataPointType")),  # type: ignore[arg-type]
                    "temporality": _JS_TEMPORALITY.get(metric.get("aggregationTemporality")),  # type: ignore[arg-type]
                    "monotonic": metric.get("isMonotonic") if isinstance(metric.get("isMonotonic"), bool) else None}
            for point in _dicts(metric.get("dataPoints")):
                out.append({"signal": "metrics", "resource": resource, "scope": scope,
                            "metric": {**head, "point": _point(point)}})
    return out


def _point(point: dict[str, Any]) -> dict[str, Any]:
    value = point.get("value")
    out: dict[str, Any] = {"start_time_unix_nano": _hrtime(point.get("startTime")),
                           "time_unix_nano": _hrtime(point.get("endTime")),
                           "attributes": _plain(point.get("attributes"))}
    if isinstance(value, bool):
        return out
    if isinstance(value, int):
        out["as_int"] = value
    elif isinstance(value, float):
        out["as_double"] = value
    elif isinstance(value, dict):  # a histogram: {count, sum, min, max, buckets: {boundaries, counts}}
        buckets = _obj(value.get("buckets"))
        shaped = fields({k: v for k, v in value.items() if k != "buckets"})
        out.update(shaped if isinstance(shaped, dict) else {})
        out["explicit_bounds"] = buckets.get("boundaries") if isinstance(buckets.get("boundaries"), list) else None
        out["bucket_counts"] = buckets.get("counts") if isinstance(buckets.get("counts"), list) else None
    return out


def _resource(line: dict[str, Any]) -> dict[str, Any]:
    """The SDK's resource as serialised: ``{attributes}``, or a Resource object's own fields."""
    resource = _obj(line.get("resource"))
    found = next((resource[k] for k in ("attributes", "_attributes", "_memoizedAttributes", "_syncAttributes")
                  if isinstance(resource.get(k), dict)), None)
    if found is None and isinstance(resource.get("_rawAttributes"), list):  # [[key, value], ...]
        found = {p[0]: p[1] for p in resource["_rawAttributes"]
                 if isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)}
    return {"attributes": _plain(found), "schema_url": _text(resource.get("schemaUrl"))}


def _scope(scope: Any) -> dict[str, Any]:
    scope = _obj(scope)
    return {"name": _text(scope.get("name")), "version": _text(scope.get("version")), "attributes": {},
            "schema_url": _text(scope.get("schemaUrl"))}


def _hrtime(value: Any) -> int | None:
    """``[seconds, nanoseconds]`` (the JS SDK's HrTime) -> nanoseconds since the epoch."""
    if (isinstance(value, list) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)):
        return int(value[0]) * 1_000_000_000 + int(value[1])
    return None


def _js_kind(value: Any) -> int | None:
    """The JS SDK's SpanKind (INTERNAL 0 .. CONSUMER 4) -> OTLP's (INTERNAL 1 .. CONSUMER 5)."""
    return value + 1 if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 4 else None


def _plain(value: Any) -> dict[str, Any]:
    return {k: v for k, v in value.items() if isinstance(k, str)} if isinstance(value, dict) else {}


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
