"""Metrics from entries: GenAI client histograms (semconv) and counters, aggregated here and sent as
OTLP protobuf (the same messages as the SDK's ``MeterProvider`` + ``OTLPMetricExporter``, proved by
``tests/test_otlp_wire.py``).

Instruments (cumulative temporality):

- ``gen_ai.client.token.usage`` histogram ``{token}``, one point per model call and ``gen_ai.token.type``
  (input, output), semconv bucket boundaries;
- ``gen_ai.client.operation.duration`` histogram ``s`` for model calls with a latency;
- ``agent_collector.sessions``, ``agent_collector.turns``, ``agent_collector.tool.calls`` (by
  ``gen_ai.tool.name`` and ``tool.result.status``) and ``agent_collector.errors`` (by ``error.type``).

Those two ``gen_ai.*`` histograms are the released names (semantic-conventions v1.41.0). With
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` (``collector.exporters.semconv``) the latest ones
of the semantic-conventions-genai repository go instead, with ``.../dup`` both: the per-category counters
``gen_ai.client.inference.usage.{input_tokens, output_tokens, cache_read.input_tokens, cache_write.input_tokens,
reasoning.output_tokens}`` (by ``gen_ai.token.modality``, ``unknown``: the agents do not say), the histograms
``gen_ai.client.inference.operation.{input,output}_tokens``, ``gen_ai.client.inference.duration`` and
``gen_ai.execute_tool.duration``.

Each series (metric + attribute set + resource) keeps its cumulative value since it was first seen (its
start time); after each batch every series goes out in one request, so a failure raises
:class:`ExportError`. The durable queue then retries the *same* batch; it is recognised and not recorded
twice. An entry whose attributes cannot be encoded is poison: not recorded, reported, the rest goes on.

Across restarts (``state``: the checkpoint store, key ``exporter.<name>``): the series are saved with the
queue position that produced them in :meth:`OtlpMetricsExporter.checkpoint` (after each delivered batch)
and restored at start with their values, start times and resource ``service.instance.id`` (the SDK draws
a new one per process, and it is part of a stream's identity); the queue resumes at that position, so no
entry is counted twice (:func:`meters_json`, :func:`load_meters`). Without a readable state (missing, or
of a shape that does not load) the series start from zero with new start times: a new start time never
comes with an old total.
"""

from __future__ import annotations

import bisect
import logging
import math
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.resources import Resource

import collector.exporters.otlp_wire as wire
from collector.exporters.base import Entry
from collector.exporters.otlp_common import SCOPE, PoisonSink, ResourceCache, no_sink
from collector.exporters.otlp_logs import reason
from collector.exporters.otlp_send import Sender
from collector.exporters.semconv import DEFAULT, Semconv
from collector.state.checkpoints import KeyState

log = logging.getLogger(__name__)
TOKEN_BUCKETS = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip
DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
TOKEN_USAGE = "gen_ai.client.token.usage"
OPERATION_DURATION = "gen_ai.client.operation.duration"


_CUMULATIVE = wire.tag(2, 0) + wire.varint(2)  # AggregationTemporality
_MONOTONIC = wire.tag(3, 0) + wire.varint(1)


@dataclass(frozen=True, slots=True)
class Instrument:
    name: str
    unit: str
    description: str = ""
    bounds: tuple[float, ...] | None = None  # a histogram's explicit bucket bounds; None: a counter

    def header(self) -> bytes:
        return wire.string(1, self.name) + wire.string(2, self.description) + wire.string(3, self.unit)


TOKENS = Instrument(TOKEN_USAGE, "{token}", "Tokens used per call", TOKEN_BUCKETS)
DURATION = Instrument(OPERATION_DURATION, "s", "GenAI operation duration", DURATION_BUCKETS)
SESSIONS = Instrument("agent_collector.sessions", "{session}")
TURNS = Instrument("agent_collector.turns", "{turn}")
TOOL_CALLS = Instrument("agent_collector.tool.calls", "{call}")
ERRORS = Instrument("agent_collector.errors", "{error}")
INFERENCE_DURATION = Instrument("gen_ai.client.inference.duration", "s", "GenAI inference duration", DURATION_BUCKETS)
TOOL_DURATION = Instrument("gen_ai.execute_tool.duration", "s", "Tool execution duration", DURATION_BUCKETS)
_USAGE = "gen_ai.client.inference.usage."
# entry field -> the latest convention's per-category counter (migration guide, "GenAI client token usage metric")
USAGE_COUNTERS = {
    "gen_ai.usage.input_tokens": Instrument(_USAGE + "input_tokens", "{token}", "Input tokens, cached included"),
    "gen_ai.usage.output_tokens": Instrument(_USAGE + "output_tokens", "{token}", "Output tokens, reasoning included"),
    "gen_ai.usage.cache_read.input_tokens": Instrument(_USAGE + "cache_read.input_tokens", "{token}",
                                                       "Input tokens read from the cache"),
    "gen_ai.usage.cache_creation.input_tokens": Instrument(_USAGE + "cache_write.input_tokens", "{token}",
                                                           "Input tokens written to the cache"),
    "gen_ai.usage.reasoning_tokens": Instrument(_USAGE + "reasoning.output_tokens", "{token}", "Reasoning tokens"),
}
OPERATION_TOKENS = {
    "gen_ai.usage.input_tokens": Instrument("gen_ai.client.inference.operation.input_tokens", "{token}",
                                            "Input tokens per inference operation", TOKEN_BUCKETS),
    "gen_ai.usage.output_tokens": Instrument("gen_ai.client.inference.operation.output_tokens", "{token}",
                                             "Output tokens per inference operation", TOKEN_BUCKETS),
}
_ALWAYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")  # 0 when the call reported none
INSTRUMENTS = {i.name: i for i in (TOKENS, DURATION, SESSIONS, TURNS, TOOL_CALLS, ERRORS, INFERENCE_DURATION,
                                   TOOL_DURATION, *USAGE_COUNTERS.values(), *OPERATION_TOKENS.values())}


@dataclass(slots=True)
class Series:
    """One metric's cumulative point for one attribute set."""

    attrs: dict[str, str]
    encoded_attrs: bytes  # the attributes as the point's KeyValue fields
    start_ns: int
    value: int = 0  # a counter's total; a histogram's count
    total: float = 0  # a histogram's sum
    low: float = float("inf")
    high: float = float("-inf")
    buckets: list[int] = field(default_factory=list)

    def point(self, instrument: Instrument, now_ns: int) -> bytes:
        times = wire.fixed64(2, self.start_ns) + wire.fixed64(3, now_ns)
        if instrument.bounds is None:
            return times + b"\x31" + struct.pack("<q", self.value) + self.encoded_attrs  # 6: as_int sfixed64
        return b"".join((
            times, wire.fixed64(4, self.value), wire.double(5, self.total),
            wire.ld(6, struct.pack(f"<{len(self.buckets)}Q", *self.buckets)),
            wire.ld(7, struct.pack(f"<{len(instrument.bounds)}d", *instrument.bounds)),
            self.encoded_attrs, wire.double(11, self.low), wire.double(12, self.high),
        ))  # fmt: skip


def _attrs(entry: Entry, *keys: str) -> dict[str, str]:
    out = {"gen_ai.agent.name": str(entry.get("gen_ai.agent.type") or "unknown")}
    for key in keys:
        value = entry.get(key)
        if value is not None and value != "":
            out[key] = str(value)
    return out


class Meter:
    """The series of one resource, recorded from entries."""

    def __init__(self, names: Semconv = DEFAULT) -> None:
        self.names = names
        self.series: dict[Instrument, dict[tuple[tuple[str, str], ...], Series]] = {}
        self.attrs = {7: wire.KeyValues(7), 9: wire.KeyValues(9)}  # a counter's point, a histogram's
        self.tokens = _Recorder(self, TOKENS)
        self.duration = _Recorder(self, DURATION)
        self.sessions = _Recorder(self, SESSIONS)
        self.turns = _Recorder(self, TURNS)
        self.tool_calls = _Recorder(self, TOOL_CALLS)
        self.errors = _Recorder(self, ERRORS)

    def get(self, instrument: Instrument, attrs: dict[str, str], start_ns: int | None = None) -> Series:
        points = self.series.setdefault(instrument, {})
        key = tuple(attrs.items())
        found = points.get(key)
        if found is None:
            encoded = self.attrs[7 if instrument.bounds is None else 9].fields(attrs)  # may raise Unencodable
            buckets = [] if instrument.bounds is None else [0] * (len(instrument.bounds) + 1)
            start = time.time_ns() if start_ns is None else start_ns
            found = points[key] = Series(dict(attrs), encoded, start, buckets=buckets)
        return found

    def metrics(self, now_ns: int) -> list[bytes]:
        out = []
        for instrument, points in self.series.items():
            body = b"".join(wire.ld(1, s.point(instrument, now_ns)) for s in points.values())
            if instrument.bounds is None:
                out.append(instrument.header() + wire.ld(7, body + _CUMULATIVE + _MONOTONIC))
            else:
                out.append(instrument.header() + wire.ld(9, body + _CUMULATIVE))
        return out

    def record(self, entry: Entry) -> None:
        name = entry.get("event.name")
        if name == "llm.response" and entry.get("collector.correction"):
            self._correction(entry)
        elif name == "llm.response":
            self._llm(entry)
        elif name == "session.start":
            self.sessions.add(1, _attrs(entry, "session.source"))
        elif name == "user.prompt":
            self.turns.add(1, _attrs(entry))
        elif name == "tool.result":
            status = str(entry.get("tool.result.status") or "success")
            self.tool_calls.add(1, {**_attrs(entry, "gen_ai.tool.name"), "tool.result.status": status})
            if self.names.latest:
                self._tool_duration(entry, status)
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
        if self.names.released:
            for key, token_type in (
                ("gen_ai.usage.input_tokens", "input"),
                ("gen_ai.usage.output_tokens", "output"),
            ):
                value = _number(entry.get(key))
                if value is not None:
                    self.tokens.record(value, {**base, "gen_ai.token.type": token_type})
        if self.names.latest:
            self._usage(entry, base)
        duration = _number(entry.get("duration_ms"))
        error = entry.get("error.type")
        if duration is not None:
            attrs = {**base, "error.type": str(error)} if error else base
            if self.names.released:
                self.duration.record(duration / 1000.0, attrs)
            if self.names.latest:
                _Recorder(self, INFERENCE_DURATION).record(duration / 1000.0, attrs)
        if error:
            self.errors.add(1, {**_attrs(entry, "gen_ai.provider.name"), "error.type": str(error)})


    def _correction(self, entry: Entry) -> None:
        """A model call delivered again with more exact usage (docs/merge.md): the latest convention's token
        counters get what it adds to the values it replaces (``collector.replaces``); a histogram cannot take
        back an observation and a counter cannot go down, so those are left as they were."""
        replaced = entry.get("collector.replaces")
        if not self.names.latest or not isinstance(replaced, dict):
            return
        base = {**_attrs(entry, "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model"),
                "gen_ai.operation.name": "chat", "gen_ai.token.modality": "unknown"}
        for key, counter in USAGE_COUNTERS.items():
            if key in replaced:
                delta = int((_number(entry.get(key)) or 0) - (_number(replaced[key]) or 0))
                if delta > 0:
                    _Recorder(self, counter).add(delta, base)

    def _usage(self, entry: Entry, base: dict[str, str]) -> None:
        """The latest convention's token instruments: a counter per category (input and output always, 0 when the
        call reported none; the others when the agent reports them) and the per-operation histograms."""
        counted = {**base, "gen_ai.token.modality": "unknown"}
        for key, counter in USAGE_COUNTERS.items():
            value = _number(entry.get(key))
            if value is not None or key in _ALWAYS:
                _Recorder(self, counter).add(int(value or 0), counted)
        for key, histogram in OPERATION_TOKENS.items():
            value = _number(entry.get(key))
            if value is not None:
                _Recorder(self, histogram).record(value, base)

    def _tool_duration(self, entry: Entry, status: str) -> None:
        duration = _number(entry.get("duration_ms"))
        if duration is None:
            return
        attrs = {**_attrs(entry, "gen_ai.tool.name"), "gen_ai.operation.name": "execute_tool"}
        if status == "error":
            attrs["error.type"] = str(entry.get("error.type") or "_OTHER")
        _Recorder(self, TOOL_DURATION).record(duration / 1000.0, attrs)


def _number(value: Any) -> float | None:
    """``value`` if it is a number a metric can take (not a bool, not negative, finite), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf:
        return value
    return None


class _Recorder:
    """An instrument of one Meter: ``add`` for counters, ``record`` for histograms."""

    def __init__(self, meter: Meter, instrument: Instrument) -> None:
        self.meter, self.instrument = meter, instrument

    def add(self, amount: int, attrs: dict[str, str]) -> None:
        self.meter.get(self.instrument, attrs).value += amount

    def record(self, value: float, attrs: dict[str, str]) -> None:
        series = self.meter.get(self.instrument, attrs)
        assert self.instrument.bounds is not None
        series.buckets[bisect.bisect_left(self.instrument.bounds, value)] += 1
        series.value += 1
        series.total += value
        series.low = min(series.low, value)
        series.high = max(series.high, value)


def series_json(series: Series) -> dict[str, Any]:
    out: dict[str, Any] = {"attrs": series.attrs, "start_ns": series.start_ns, "value": series.value}
    if series.buckets:
        out.update(total=series.total, buckets=list(series.buckets),
                   low=series.low if math.isfinite(series.low) else None,
                   high=series.high if math.isfinite(series.high) else None)
    return out


def meters_json(meters: dict[tuple[str, str], Meter]) -> list[dict[str, Any]]:
    return [
        {
            "resource": list(key),
            "series": {instrument.name: [series_json(s) for s in points.values()]
                       for instrument, points in meter.series.items()},
        }
        for key, meter in meters.items()
    ]


def load_meters(data: Any, names: Semconv = DEFAULT) -> dict[tuple[str, str], Meter]:
    """The meters saved by :func:`meters_json`; raises ValueError/TypeError/KeyError on a bad shape."""
    if not isinstance(data, list):
        raise TypeError("meters is not a list")
    meters: dict[tuple[str, str], Meter] = {}
    for item in data:
        key = (str(item["resource"][0]), str(item["resource"][1]))
        meter = meters.setdefault(key, Meter(names))
        for name, points in dict(item["series"]).items():
            instrument = INSTRUMENTS[name]
            for saved in points:
                attrs = {str(k): str(v) for k, v in dict(saved["attrs"]).items()}
                series = meter.get(instrument, attrs, start_ns=int(saved["start_ns"]))
                series.value = int(saved["value"])
                if instrument.bounds is not None:
                    buckets = [int(b) for b in saved["buckets"]]
                    if len(buckets) != len(instrument.bounds) + 1:
                        raise ValueError(f"{name}: {len(buckets)} buckets")
                    series.buckets = buckets
                    series.total = float(saved["total"])
                    series.low = float("inf") if saved.get("low") is None else float(saved["low"])
                    series.high = float("-inf") if saved.get("high") is None else float(saved["high"])
    return meters


class OtlpMetricsExporter:
    def __init__(self, name: str, sender: Sender, resources: ResourceCache, poison: PoisonSink = no_sink,
                 state: KeyState | None = None, names: Semconv = DEFAULT) -> None:
        self.name = name
        self.names = names
        self.sender = sender
        self.resources = resources
        self.on_poison = poison
        self.state = state
        self._meters: dict[tuple[str, str], Meter] = {}
        self._last_batch: tuple[str, str, int] | None = None
        self.position: dict[str, int] | None = None  # the queue position the saved series cover
        self.recorded = 0
        self.requests = 0
        self.poison = 0
        self.restored_series = 0
        self._load()

    # -- state ----------------------------------------------------------------------------------------------
    def _load(self) -> None:
        data = self.state.load() if self.state is not None else None
        if not isinstance(data, dict):
            self._pin_instance(None)
            return
        self._pin_instance(data.get("instance"))
        try:
            meters = load_meters(data.get("meters", []), self.names)
            for key in meters:
                self.resources.encoded(key)  # raises on a resource no longer encodable
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, wire.Unencodable) as exc:
            log.error("%s: unreadable metric state (%s); the series start from zero with new start times",
                      self.name, exc)
            return
        position = data.get("position")
        self._meters = meters
        self.position = position if isinstance(position, dict) else None
        self.restored_series = sum(len(p) for m in meters.values() for p in m.series.values())
        log.info("%s: %d cumulative series resumed with their start times", self.name, self.restored_series)

    def _pin_instance(self, saved: Any) -> None:
        """A stream's identity includes its resource, whose ``service.instance.id`` the SDK draws anew in
        every process: the series resume under the instance id they were saved with (unless configured)."""
        if "service.instance.id" in self.resources.extra:
            return
        if not isinstance(saved, str) or not saved:
            saved = str(Resource.create({}).attributes.get("service.instance.id", ""))
        self.resources.extra["service.instance.id"] = saved

    def checkpoint(self, position: dict[str, int] | None = None) -> None:
        """Save the series with the queue ``position`` that produced them (the queue calls this just
        before it writes its ack file)."""
        if self.state is None:
            return
        if position is not None:
            self.position = dict(position)
        self.state.save({"meters": meters_json(self._meters), "position": self.position,
                         "instance": self.resources.extra.get("service.instance.id")})

    def restored_position(self) -> dict[str, int] | None:
        """Where the queue resumes: the position the restored series cover (None: no state)."""
        return self.position

    def meter(self, key: tuple[str, str]) -> Meter:
        found = self._meters.get(key)
        if found is None:
            self.resources.encoded(key)  # may raise Unencodable: the entry is poison
            found = self._meters[key] = Meter(self.names)
        return found

    def export(self, batch: Sequence[Entry]) -> None:
        if not batch:
            return
        signature = (str(batch[0].get("event.id")), str(batch[-1].get("event.id")), len(batch))
        if signature != self._last_batch:  # a retry of the same batch is not recorded again
            for entry in batch:
                self._record(entry)
            self.recorded += len(batch)
            self._last_batch = signature
        self._send()

    def _record(self, entry: Entry) -> None:
        try:
            self.meter(self.resources.key(entry)).record(entry)
        except (wire.Unencodable, TypeError, ValueError, OverflowError) as exc:
            why = f"OTLP metrics: {reason(exc)}"
            self.poison += 1
            log.error("%s: entry %s cannot be recorded as OTLP metrics, quarantined: %s", self.name,
                      entry.get("event.id"), why)
            self.on_poison(entry, why)

    def _send(self) -> None:
        now = time.time_ns()
        groups = [(self.resources.encoded(k), SCOPE, m.metrics(now)) for k, m in self._meters.items()]
        groups = [g for g in groups if g[2]]
        if not groups:
            return
        self.sender.send(wire.request(groups), "sending metrics")
        self.requests += 1

    def shutdown(self) -> None:
        self.sender.close()

    def stats(self) -> dict[str, Any]:
        return {
            "signal": "metrics",
            "endpoint": self.sender.endpoint,
            "recorded_entries": self.recorded,
            "requests": self.requests,
            "unencodable": self.poison,
            "restored_series": self.restored_series,
            "semconv": self.names.name,
        }
