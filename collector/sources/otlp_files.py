"""Two source kinds of OpenTelemetry records, one record per log record, span or metric data point
(``otel_log``, ``otel_span``, ``otel_metric``; the shape in docs/otlp-receiver.md):

* ``otlp``: what the ingest's OTLP receiver spooled for this agent, ``<spool>/otlp/<agent>/*.jsonl``, one
  line per accepted request (``{ts, agent, event: <signal>, payload: {digest, export}}``). Its
  ``service_names`` are the ``service.name`` values the receiver routes to this agent.
* ``otlp_file``: JSON lines an agent's own file exporter appends (``globs``): OTLP/JSON export requests,
  or the OpenTelemetry JS SDK's serialised spans, log records and metric exports
  (``collector.sources.otel_js_lines``).

A line makes several records. All but the last carry the position of the line's start, the last the
position after it: a batch that ends inside a line commits the start, so after a crash the line is read
again and the records already delivered come again with the same ``position`` (``<line offset>:<index>``)
and, in the spool, the same ``request`` digest and ``index``, which a parser makes its ids of.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from collector.definitions import AgentDefinition
from collector.definitions.schema import kind_schema
from collector.model.boundary import strict_json_fits
from collector.model.raw import RawRecord
from collector.registry import Plugin
from collector.sources.base import Item, Position, Source
from collector.sources.context import BuildContext, SourceBuilder
from collector.sources.jsonl_files import JsonlFiles
from collector.sources.otel_js_lines import records_of_line
from collector.sources.otlp_records import KINDS, parts_left_out, records_of, signal_of_export

SPOOL_FOLDER = "otlp"  # <spool>/otlp/<agent>/, written by collector.ingest.otlp_route
_SIGNALS = frozenset(KINDS)


class OtlpFiles(JsonlFiles):
    """JSONL files of OTel records; ``spooled``: lines are the receiver's envelopes (else an agent's own)."""

    def __init__(self, name: str, agent: str, globs: Iterable[str], positions: dict[str, dict[str, Any]],
                 max_line: int, spooled: bool) -> None:
        super().__init__(name, agent, "otel", globs, positions, max_line)
        self._spooled = spooled
        self.stats.extra["otel_records"] = 0
        self.stats.extra["otel_lines_without_records"] = 0
        self.stats.extra["otel_parts_not_objects"] = 0  # an export request's lists or elements of another type

    async def read(self) -> AsyncIterator[Item]:
        async for record, position in super().read():
            if record is None:
                yield None, position
                continue
            parts = self._expand(record.data)
            if not parts:
                self.stats.extra["otel_lines_without_records"] += 1
                yield None, position
                continue
            start = _start(position, record.position)
            last = len(parts) - 1
            self.stats.extra["otel_records"] += len(parts)
            for index, data in enumerate(parts):
                made = RawRecord(record.agent, KINDS[data["signal"]], data, record.source_id,
                                 f"{record.position}:{index}", record.observed_ns, record.meta, True,
                                 data if strict_json_fits(data) else None)
                yield made, position if index == last else start

    def _expand(self, line: dict[str, Any]) -> list[dict[str, Any]]:
        if not self._spooled:
            export_signal = signal_of_export(line)
            if export_signal is not None:
                self.stats.extra["otel_parts_not_objects"] += parts_left_out(export_signal, line)
            return [{**r, "received": None, "request": None, "index": i} for i, r in enumerate(records_of_line(line))]
        signal, payload = line.get("event"), line.get("payload")
        if signal not in _SIGNALS or not isinstance(payload, dict) or not isinstance(payload.get("export"), dict):
            return []
        received = line.get("ts") if isinstance(line.get("ts"), int | float) else None
        digest = payload.get("digest") if isinstance(payload.get("digest"), str) else None
        self.stats.extra["otel_parts_not_objects"] += parts_left_out(str(signal), payload["export"])
        return [{**r, "received": received, "request": digest, "index": i}
                for i, r in enumerate(records_of(str(signal), payload["export"]))]


def _start(after: Position, offset: str) -> Position:
    """The position of a line's start, from the position after it (same file identity, no tail digest)."""
    value = {k: v for k, v in after.value.items() if k not in ("tail", "tail_len")}
    value["offset"], value["skipping"] = int(offset), False
    return Position(after.stream, value)


def _spool(spec: dict[str, Any], defn: AgentDefinition, ctx: BuildContext) -> Source:
    pattern = str(ctx.paths.spool_dir / SPOOL_FOLDER / defn.id / "*.jsonl")
    return OtlpFiles(f"{defn.id}:{spec['name']}", defn.id, [pattern], ctx.positions, ctx.max_line, spooled=True)


def _files(spec: dict[str, Any], defn: AgentDefinition, ctx: BuildContext) -> Source:
    globs = [str(ctx.paths.expand(g)) for g in spec["globs"]]
    return OtlpFiles(f"{defn.id}:{spec['name']}", defn.id, globs, ctx.positions, ctx.max_line, spooled=False)


PLUGINS: list[Plugin[SourceBuilder]] = [
    Plugin("otlp", _spool, kind_schema("source_otlp")),
    Plugin("otlp_file", _files, kind_schema("source_otlp_file")),
]


def otlp_service_agents(definitions: Iterable[AgentDefinition]) -> dict[str, str]:
    """service.name -> agent id, from the enabled agents' ``otlp`` sources (the first agent by id wins)."""
    mapping: dict[str, str] = {}
    for defn in sorted(definitions, key=lambda d: d.id):
        if not defn.enabled:
            continue
        for spec in defn.sources:
            if spec.get("kind") != "otlp":
                continue
            for name in spec.get("service_names", ()):
                if isinstance(name, str):
                    mapping.setdefault(name, defn.id)
    return mapping
