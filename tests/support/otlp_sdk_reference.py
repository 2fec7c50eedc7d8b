"""The OpenTelemetry SDK's own encoding of entries, the reference our hand-written encoder must match.

This is what the exporters did before they encoded by hand: SDK ``LogRecord`` objects from a
``LoggerProvider``, ``ReadableSpan`` objects, a ``MeterProvider`` with the same views and instruments read
by an ``InMemoryMetricReader``, each turned into its export request by the SDK exporters' encoders
(``opentelemetry.exporter.otlp.proto.common``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor, ReadWriteLogRecord
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from collector import __version__
from collector.exporters.otlp_common import ResourceCache
from collector.exporters.otlp_logs import log_attributes, severity_text
from collector.exporters.otlp_metrics import DURATION, ERRORS, SESSIONS, TOKENS, TOOL_CALLS, TURNS, Meter
from collector.exporters.trace_builder import SpanData

SCOPE = InstrumentationScope("agent-collector", __version__)
_SEVERITY = {"ERROR": SeverityNumber.ERROR, "WARN": SeverityNumber.WARN, "INFO": SeverityNumber.INFO}


class _Collect(LogRecordProcessor):
    def __init__(self) -> None:
        self.records: list[ReadWriteLogRecord] = []

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        self.records.append(log_record)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def sdk_logs(entries: Sequence[dict[str, Any]], resources: ResourceCache) -> bytes:
    collect = _Collect()
    providers: dict[tuple[str, str], Any] = {}
    for entry in entries:
        key = resources.key(entry)
        if key not in providers:
            provider = LoggerProvider(resource=resources.get(key), shutdown_on_exit=False)
            provider.add_log_record_processor(collect)
            providers[key] = provider.get_logger("agent-collector", __version__)
        text = severity_text(entry)
        time_ns = int(entry.get("time_unix_nano") or 0)
        providers[key].emit(LogRecord(
            timestamp=time_ns, observed_timestamp=int(entry.get("observed_time_unix_nano") or time_ns),
            severity_number=_SEVERITY[text], severity_text=text, body=str(entry.get("event.name", "")),
            attributes=log_attributes(entry), event_name=str(entry.get("event.name", "")) or None,
        ))  # fmt: skip
    return bytes(encode_logs(collect.records).SerializeToString())


def readable(span: SpanData, resources: ResourceCache, key: tuple[str, str]) -> ReadableSpan:
    flags = TraceFlags(TraceFlags.SAMPLED)
    context = SpanContext(span.trace_id, span.span_id, is_remote=False, trace_flags=flags)
    parent = None if span.parent_id is None else SpanContext(span.trace_id, span.parent_id, span.parent_remote, flags)
    code = {"UNSET": StatusCode.UNSET, "OK": StatusCode.OK, "ERROR": StatusCode.ERROR}[span.status]
    return ReadableSpan(
        name=span.name, context=context, parent=parent, resource=resources.get(key),
        attributes=dict(span.attributes), events=[Event(e.name, dict(e.attributes), e.time_ns) for e in span.events],
        kind={"CLIENT": SpanKind.CLIENT}.get(span.kind, SpanKind.INTERNAL),
        status=Status(code, span.status_message if span.status == "ERROR" else None),
        start_time=span.start_ns, end_time=span.end_ns, instrumentation_scope=SCOPE,
    )  # fmt: skip


def sdk_spans(spans: Sequence[tuple[tuple[str, str], SpanData]], resources: ResourceCache) -> bytes:
    return bytes(encode_spans([readable(s, resources, key) for key, s in spans]).SerializeToString())


def sdk_metrics(entries: Sequence[dict[str, Any]], resources: ResourceCache) -> list[bytes]:
    """One request per resource, as the SDK's MeterProviders (one per resource) collect them; our own
    ``Meter`` code decides what is recorded, the SDK's instruments aggregate it."""
    out = []
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for entry in entries:
        by_key.setdefault(resources.key(entry), []).append(entry)
    for key, group in by_key.items():
        reader = InMemoryMetricReader()
        views = [View(instrument_name=i.name, aggregation=ExplicitBucketHistogramAggregation(i.bounds))
                 for i in (TOKENS, DURATION) if i.bounds]
        provider = MeterProvider(metric_readers=[reader], resource=resources.get(key), views=views,
                                 shutdown_on_exit=False)
        meter = provider.get_meter("agent-collector", __version__)
        sdk = {
            i: meter.create_histogram(i.name, unit=i.unit, description=i.description) if i.bounds
            else meter.create_counter(i.name, unit=i.unit, description=i.description)
            for i in (TOKENS, DURATION, SESSIONS, TURNS, TOOL_CALLS, ERRORS)
        }
        ours = Meter()
        for instrument, recorder in vars(ours).items():
            if hasattr(recorder, "instrument"):
                setattr(ours, instrument, _Forward(sdk[recorder.instrument]))
        for entry in group:
            ours.record(entry)
        data = reader.get_metrics_data()
        assert data is not None
        out.append(bytes(encode_metrics(data).SerializeToString()))
        provider.shutdown()
    return out


class _Forward:
    """Stands where our Meter keeps a recorder: hands the measurement to an SDK instrument."""

    def __init__(self, instrument: Any) -> None:
        self.instrument = instrument

    def add(self, amount: int, attrs: dict[str, str]) -> None:
        self.instrument.add(amount, attrs)

    def record(self, value: float, attrs: dict[str, str]) -> None:
        self.instrument.record(value, attrs)
