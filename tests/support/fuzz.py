"""The single-field mutation fuzz of the whole pipeline and exporters, shared by the default test (a
bounded number of examples) and benchmarks/fuzz_pipeline.py (a long run).

Records come from the real sources over the real fixture cases of every agent (hook spools, transcripts,
JSON documents, SQLite rows). One example takes one case, replaces one value anywhere in one record by a
hostile value, and runs all of the case's records through the real pipeline (boundary, parsers, dedupe,
correlation, session status, content policy, masking, quarantine) and the real exporters (JSONL, and the
OTLP logs, traces and metrics exporters encoding to protobuf in memory).
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import orjson
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.agents.registry import load_parser
from collector.definitions import load_definitions
from collector.exporters.jsonl import JsonlExporter
from collector.exporters.otlp_common import ResourceCache
from collector.exporters.otlp_logs import OtlpLogsExporter
from collector.exporters.otlp_metrics import OtlpMetricsExporter
from collector.exporters.otlp_traces import OtlpTracesExporter
from collector.model import RawRecord
from collector.pipeline.correlate import Correlator
from collector.pipeline.processor import AgentSettings, Pipeline
from collector.pipeline.quarantine import Quarantine
from collector.sources.factory import BuildContext, build_sources
from collector.state.checkpoints import CheckpointStore, KeyState
from support import FIXTURES, builtin_tracker, prepare_fixture

AGENTS = ("claude-code", "codex", "gemini-cli", "qwen-code", "opencode")


def fixture_cases() -> list[tuple[str, Path]]:
    return [(agent, case) for agent in AGENTS for case in sorted((FIXTURES / agent).iterdir()) if case.is_dir()]


def read_case(agent: str, case: Path, tmp: Path) -> list[RawRecord]:
    """Every record the agent's real sources yield for one fixture case."""
    paths = prepare_fixture(case, tmp)
    defn = load_definitions().agents[agent]
    sources = build_sources(defn, BuildContext(paths, {}, 16 * 1024 * 1024))

    async def read_all() -> list[RawRecord]:
        return [r for s in sources async for r, _ in s.read() if r is not None]

    return asyncio.run(read_all())


def _deep(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


_SPECIAL = [
    None, True, False, 0, -1, 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63) - 1, 2**70,
    10**15, 10**19, 1e15, 1e19, 1e300, -1e300, 0.5, -0.0, float("nan"), float("inf"), float("-inf"),
    "", " ", "\ud800", "a\udfffb", "\ufeff{}", "\x00", "0", "-1", "1e400", "null",
    "1969-12-31T23:59:59Z", "1970-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
    "2026-13-45T99:99:99Z", "not a time", "x" * 100_000, "AKIA" + "A" * 16, [], {}, [[]], [{}], {"": None},
    {"nested": {"deeper": [1, "two", None]}}, ["a", 1, None, {"b": []}],
]
_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=40))
HOSTILE = st.one_of(
    st.sampled_from(_SPECIAL),
    _LEAF,
    st.integers(min_value=30, max_value=400).map(_deep),
    st.recursive(_LEAF, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                 max_leaves=12),
)


def value_paths(data: Any, prefix: tuple[Any, ...] = (), limit: int = 2000) -> list[tuple[Any, ...]]:
    """Every place in ``data`` a value can be replaced (dict keys and list indexes), breadth first."""
    out: list[tuple[Any, ...]] = []
    queue: list[tuple[tuple[Any, ...], Any]] = [(prefix, data)]
    while queue and len(out) < limit:
        path, value = queue.pop(0)
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, child in items:
            out.append((*path, key))
            queue.append(((*path, key), child))
    return out


def mutate(record: RawRecord, path: tuple[Any, ...], value: Any) -> RawRecord:
    data = copy.deepcopy(record.data)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return replace(record, data=data)


class _Encoding:
    """Stands in for the network: parses each encoded request with protobuf's own classes, sends nothing."""

    endpoint = "memory"

    def __init__(self, message: Any) -> None:
        self.message, self.bytes = message, 0

    def send(self, body: bytes, what: str) -> None:
        self.message.FromString(body)  # a request protobuf cannot parse fails the example
        self.bytes += len(body)

    def close(self) -> None:
        pass


@dataclass
class Rig:
    """The real pipeline and exporters for one example, writing into ``tmp``."""

    tmp: Path
    capture: bool
    pipeline: Pipeline = field(init=False)
    exporters: list[Any] = field(init=False)

    def __post_init__(self) -> None:
        definitions = _definitions()
        agents = {a: AgentSettings(parser_for(a), self.capture, definitions[a].raw.get("provider")) for a in AGENTS}
        self.pipeline = Pipeline(agents, {"user.id": "u", "host.name": "h"}, lambda ids: set(), Correlator(),
                                 True, builtin_tracker(), quarantine=Quarantine(self.tmp / "quarantine"))
        resources = ResourceCache()
        self.exporters = [
            JsonlExporter(self.tmp / "out"),
            OtlpLogsExporter("logs", _Encoding(ExportLogsServiceRequest), resources),
            OtlpTracesExporter("traces", _Encoding(ExportTraceServiceRequest), resources,
                               KeyState(CheckpointStore(self.tmp / "t" / "checkpoints.sqlite"), "exporter.traces"),
                               idle_timeout_s=0, grace_s=0),
            OtlpMetricsExporter("metrics", _Encoding(ExportMetricsServiceRequest), resources),
        ]

    def run(self, records: list[RawRecord]) -> list[dict[str, Any]]:
        output = self.pipeline.process(records)
        entries = output.entries
        assert output.lines == [orjson.dumps(e) for e in entries], "the encode check's JSON is the entries'"
        self.exporters[0].export_lines(entries, output.lines)  # as the delivery hands them to the JSON lines file
        for exporter in self.exporters[1:]:
            exporter.export(entries)
        traces = self.exporters[2]
        traces.flush_all()
        assert not traces.outbox, "every span was encoded"
        written = []
        for path in sorted((self.tmp / "out").glob("*.jsonl")):
            written.extend(orjson.loads(line) for line in path.read_bytes().splitlines())
        for exporter in self.exporters:
            exporter.shutdown()
        return written


@cache
def _definitions() -> dict[str, Any]:
    """The built-in definitions, loaded (and schema-checked) once, not per example."""
    return dict(load_definitions().agents)


@cache
def parser_for(agent: str) -> Any:
    return load_parser(_definitions()[agent].parser)


def parser_ids(record: RawRecord) -> set[str]:
    """The ids the record's own parser gives it (what must reach the output, once)."""
    return {e.id for e in parser_for(record.agent)(record)}
