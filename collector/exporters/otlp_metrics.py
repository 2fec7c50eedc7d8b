"""Metrics from entries: GenAI client histograms (semconv) and counters, sent with ``OTLPMetricExporter``.

Instruments (cumulative temporality):

- ``gen_ai.client.token.usage`` histogram ``{token}``, one point per model call and ``gen_ai.token.type``
  (input, output), semconv bucket boundaries;
- ``gen_ai.client.operation.duration`` histogram ``s`` for model calls with a latency;
- ``agent_collector.sessions``, ``agent_collector.turns``, ``agent_collector.tool.calls`` (by
  ``gen_ai.tool.name`` and ``tool.result.status``) and ``agent_collector.errors`` (by ``error.type``).

Values are recorded into an SDK ``MeterProvider`` read by a manual reader; after each batch the reader
collects and the batch of points goes to the exporter directly, so a failure raises :class:`ExportError`.
The durable queue then retries the *same* batch; it is recognised and not recorded twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExportResult
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

from collector import __version__
from collector.exporters.base import Entry
from collector.exporters.otlp_common import ResourceCache, SdkExporter

TOKEN_BUCKETS = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip
DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
TOKEN_USAGE = "gen_ai.client.token.usage"
OPERATION_DURATION = "gen_ai.client.operation.duration"


def _attrs(entry: Entry, *keys: str) -> dict[str, str]:
    out = {"gen_ai.agent.name": str(entry.get("gen_ai.agent.type") or "unknown")}
    for key in keys:
        value = entry.get(key)
        if value is not None and value != "":
            out[key] = str(value)
    return out


class _Instruments:
    """One MeterProvider (one resource) and its instruments."""

    def __init__(self, resource: Any) -> None:
        self.reader = InMemoryMetricReader()
        views = [
            View(instrument_name=TOKEN_USAGE, aggregation=ExplicitBucketHistogramAggregation(TOKEN_BUCKETS)),
            View(
                instrument_name=OPERATION_DURATION,
                aggregation=ExplicitBucketHistogramAggregation(DURATION_BUCKETS),
            ),
        ]
        self.provider = MeterProvider(
            metric_readers=[self.reader], resource=resource, views=views, shutdown_on_exit=False
        )
        meter = self.provider.get_meter("agent-collector", __version__)
        self.tokens = meter.create_histogram(TOKEN_USAGE, unit="{token}", description="Tokens used per call")
        self.duration = meter.create_histogram(
            OPERATION_DURATION, unit="s", description="GenAI operation duration"
        )
        self.sessions = meter.create_counter("agent_collector.sessions", unit="{session}")
        self.turns = meter.create_counter("agent_collector.turns", unit="{turn}")
        self.tool_calls = meter.create_counter("agent_collector.tool.calls", unit="{call}")
        self.errors = meter.create_counter("agent_collector.errors", unit="{error}")

    def record(self, entry: Entry) -> None:
        name = entry.get("event.name")
        if name == "llm.response":
            self._llm(entry)
        elif name == "session.start":
            self.sessions.add(1, _attrs(entry, "session.source"))
        elif name == "user.prompt":
            self.turns.add(1, _attrs(entry))
        elif name == "tool.result":
            status = str(entry.get("tool.result.status") or "success")
            self.tool_calls.add(1, {**_attrs(entry, "gen_ai.tool.name"), "tool.result.status": status})
        elif name == "error":
            self.errors.add(
                1,
                {
                    **_attrs(entry, "gen_ai.provider.name"),
                    "error.type": str(entry.get("error.type") or "_OTHER"),
                },
            )

    def _llm(self, entry: Entry) -> None:
        base = {
            **_attrs(entry, "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model"),
            "gen_ai.operation.name": "chat",
        }
        for key, token_type in (
            ("gen_ai.usage.input_tokens", "input"),
            ("gen_ai.usage.output_tokens", "output"),
        ):
            value = entry.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
                self.tokens.record(value, {**base, "gen_ai.token.type": token_type})
        duration = entry.get("duration_ms")
        error = entry.get("error.type")
        if isinstance(duration, int | float) and not isinstance(duration, bool) and duration >= 0:
            attrs = {**base, "error.type": str(error)} if error else base
            self.duration.record(duration / 1000.0, attrs)
        if error:
            self.errors.add(1, {**_attrs(entry, "gen_ai.provider.name"), "error.type": str(error)})


class OtlpMetricsExporter:
    def __init__(self, name: str, sdk: SdkExporter, resources: ResourceCache) -> None:
        self.name = name
        self.sdk = sdk
        self.resources = resources
        self._by_resource: dict[tuple[str, str], _Instruments] = {}
        self._last_batch: tuple[str, str, int] | None = None
        self.recorded = 0
        self.requests = 0

    def _instruments(self, key: tuple[str, str]) -> _Instruments:
        found = self._by_resource.get(key)
        if found is None:
            found = self._by_resource[key] = _Instruments(self.resources.get(key))
        return found

    def export(self, batch: Sequence[Entry]) -> None:
        if not batch:
            return
        signature = (str(batch[0].get("event.id")), str(batch[-1].get("event.id")), len(batch))
        if signature != self._last_batch:  # a retry of the same batch is not recorded again
            for entry in batch:
                self._instruments(self.resources.key(entry)).record(entry)
            self.recorded += len(batch)
            self._last_batch = signature
        self._send()

    def _send(self) -> None:
        for instruments in self._by_resource.values():
            data = instruments.reader.get_metrics_data()
            if data is None or not data.resource_metrics:
                continue
            self.sdk.reset()
            if self.sdk.exporter.export(data) != MetricExportResult.SUCCESS:
                raise self.sdk.failure("sending metrics")
            self.requests += 1

    def shutdown(self) -> None:
        self.sdk.exporter.shutdown()
        for instruments in self._by_resource.values():
            instruments.provider.shutdown()

    def stats(self) -> dict[str, Any]:
        return {
            "signal": "metrics",
            "endpoint": self.sdk.endpoint,
            "recorded_entries": self.recorded,
            "requests": self.requests,
        }
