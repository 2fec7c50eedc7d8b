"""OTLP/JSON export requests cut into records: one per log record, span or metric data point, each with
its resource and scope (docs/otlp-receiver.md, "The records").

The parser boundary sees plain JSON values: attribute lists (``[{key, value: {stringValue: ...}}]``)
become objects (``{key: value}``; ``intValue`` an int, ``bytesValue`` the base64 text, arrays lists,
key/value lists objects), field names are snake_case as in the ``.proto`` files, 64-bit integers that
OTLP/JSON writes as strings are ints (a time that is no integer is None), ids are hex. What the request
holds that is not of the expected shape becomes None or is left out: a record is never refused here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

KINDS = {"logs": "otel_log", "traces": "otel_span", "metrics": "otel_metric"}
SIGNAL_OF = {kind: signal for signal, kind in KINDS.items()}
_RESOURCES = {"logs": "resourceLogs", "traces": "resourceSpans", "metrics": "resourceMetrics"}
_SCOPES = {"logs": "scopeLogs", "traces": "scopeSpans", "metrics": "scopeMetrics"}
_ITEMS = {"logs": "logRecords", "traces": "spans", "metrics": "metrics"}
POINT_KINDS = {"gauge": "gauge", "sum": "sum", "histogram": "histogram",
               "exponentialHistogram": "exponential_histogram", "summary": "summary"}
MAX_DEPTH = 32  # nested array and key/value list values deeper than this are cut (the text below)
TOO_DEEP = "(nested too deep)"
_INT_FIELDS = frozenset({"as_int", "count", "zero_count", "flags", "severity_number", "kind", "code",
                         "dropped_attributes_count", "dropped_events_count", "dropped_links_count", "scale"})
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_DIGITS = re.compile(r"-?[0-9]{1,20}")


def signal_of_export(export: dict[str, Any]) -> str | None:
    """Which signal an OTLP/JSON export request carries (None when it is none of them)."""
    return next((signal for signal, key in _RESOURCES.items() if isinstance(export.get(key), list)), None)


def records_of(signal: str, export: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The records of one export request, in order."""
    for resource_part in _dicts(export.get(_RESOURCES[signal])):
        resource = _resource(resource_part)
        for scope_part in _dicts(resource_part.get(_SCOPES[signal])):
            scope = _scope(scope_part)
            for item in _dicts(scope_part.get(_ITEMS[signal])):
                if signal == "logs":
                    yield {"signal": signal, "resource": resource, "scope": scope, "log": fields(item)}
                elif signal == "traces":
                    yield {"signal": signal, "resource": resource, "scope": scope, "span": fields(item)}
                else:
                    for metric in _metric_points(item):
                        yield {"signal": signal, "resource": resource, "scope": scope, "metric": metric}


def parts_left_out(signal: str, export: dict[str, Any]) -> int:
    """How many parts of the request ``records_of`` leaves out: a resource, scope or item list that is not
    a list, an element of one that is not an object (each is counted by the source, never silently lost)."""
    left = 0
    for resource_part in _dicts(export.get(_RESOURCES[signal])):
        for scope_part in _dicts(resource_part.get(_SCOPES[signal])):
            items = scope_part.get(_ITEMS[signal])
            left += _not_objects(items)
            if signal == "metrics":
                for metric in _dicts(items):
                    bodies = [metric[k] for k in POINT_KINDS if isinstance(metric.get(k), dict)]
                    left += sum(_not_objects(b.get("dataPoints")) for b in bodies[:1])
        left += _not_objects(resource_part.get(_SCOPES[signal]))
    return left + _not_objects(export.get(_RESOURCES[signal]))


def _not_objects(value: Any) -> int:
    """1 for a present value that is not a list, else its elements that are not objects."""
    if value is None:
        return 0
    return sum(not isinstance(v, dict) for v in value) if isinstance(value, list) else 1


def _resource(part: dict[str, Any]) -> dict[str, Any]:
    inner = part.get("resource")
    inner = inner if isinstance(inner, dict) else {}
    return {"attributes": attributes(inner.get("attributes")), "schema_url": _str(part.get("schemaUrl"))}


def _scope(part: dict[str, Any]) -> dict[str, Any]:
    inner = part.get("scope")
    inner = inner if isinstance(inner, dict) else {}
    return {"name": _str(inner.get("name")), "version": _str(inner.get("version")),
            "attributes": attributes(inner.get("attributes")), "schema_url": _str(part.get("schemaUrl"))}


def _metric_points(metric: dict[str, Any]) -> Iterator[dict[str, Any]]:
    head = {"name": _str(metric.get("name")), "description": _str(metric.get("description")),
            "unit": _str(metric.get("unit"))}
    for key, kind in POINT_KINDS.items():
        body = metric.get(key)
        if not isinstance(body, dict):
            continue
        shape = {"type": kind, "temporality": _int(body.get("aggregationTemporality")),
                 "monotonic": body.get("isMonotonic") if isinstance(body.get("isMonotonic"), bool) else None}
        for point in _dicts(body.get("dataPoints")):
            yield {**head, **shape, "point": fields(point)}
        return


def fields(item: dict[str, Any], depth: int = 0) -> dict[str, Any] | str:
    """One OTLP/JSON object with snake_case keys, its attributes and body made plain, integers as ints."""
    if depth >= MAX_DEPTH:
        return TOO_DEEP
    out: dict[str, Any] = {}
    for key, value in item.items():
        if not isinstance(key, str):
            continue
        name = _CAMEL.sub("_", key).lower()
        if name == "attributes":
            out[name] = attributes(value)
        elif name == "body":
            out[name] = any_value(value)
        elif name.endswith("unix_nano") or name in _INT_FIELDS:
            out[name] = _int(value)
        elif name == "bucket_counts":
            out[name] = [_int(v) for v in value] if isinstance(value, list) else None
        elif name in ("events", "links", "exemplars"):
            out[name] = [fields(v, depth + 1) for v in _dicts(value)]
        elif isinstance(value, dict):
            out[name] = fields(value, depth + 1)  # status, positive/negative buckets, ...
        elif isinstance(value, list):
            out[name] = _bounded(value, depth + 1)
        else:
            out[name] = value
    return out


def _bounded(value: Any, depth: int) -> Any:
    """A value of a field the format does not name, with its depth bounded."""
    if isinstance(value, dict):
        return fields(value, depth)
    if isinstance(value, list):
        return TOO_DEEP if depth >= MAX_DEPTH else [_bounded(v, depth + 1) for v in value]
    return value


def attributes(kvs: Any, depth: int = 0) -> dict[str, Any]:
    """``[{key, value}]`` -> ``{key: plain value}`` (a later duplicate key wins, as in the SDKs)."""
    out: dict[str, Any] = {}
    for kv in _dicts(kvs):
        key = kv.get("key")
        if isinstance(key, str):
            out[key] = any_value(kv.get("value"), depth)
    return out


def any_value(value: Any, depth: int = 0) -> Any:
    """An OTLP/JSON AnyValue as a plain JSON value."""
    if not isinstance(value, dict):
        return None
    if depth >= MAX_DEPTH:
        return TOO_DEEP
    for key, item in value.items():
        if key in ("stringValue", "bytesValue"):
            return item if isinstance(item, str) else None
        if key == "boolValue":
            return item if isinstance(item, bool) else None
        if key == "intValue":
            return _int(item)
        if key == "doubleValue":
            return item if isinstance(item, int | float) and not isinstance(item, bool) else None
        if key == "arrayValue":
            values = item.get("values") if isinstance(item, dict) else None
            return [any_value(v, depth + 1) for v in values] if isinstance(values, list) else []
        if key == "kvlistValue":
            return attributes(item.get("values") if isinstance(item, dict) else None, depth + 1)
    return None


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
