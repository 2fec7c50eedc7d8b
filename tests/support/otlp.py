"""OTLP test helpers shared by several test modules: a fake inner exporter and entries for the durable
queue; the mixed entry stream and the real OTLP queues of the fault tests; and what a receiver got, per
request, for the kill tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collector.exporters.base import Entry, ExportError
from collector.exporters.otlp import build_otlp_exporters
from collector.exporters.queue import QueuedExporter, QueueOptions
from support import make_paths
from support.otlp_receiver import OtlpReceiver

# test_otlp_queue.py: the durable queue

class FakeBackend:
    """An inner exporter that can be switched down, refuse for good, or be slow."""

    name = "fake"

    def __init__(self) -> None:
        self.received: list[Entry] = []
        self.batches = 0
        self.down = False
        self.refuse = False
        self.delay = 0.0
        self.ticks = 0
        self.lock = threading.Lock()

    def export(self, batch: Sequence[Entry]) -> None:
        if self.delay:
            time.sleep(self.delay)
        if self.refuse:
            raise ExportError("400 bad request", retryable=False)
        if self.down:
            raise ExportError("connection refused")
        with self.lock:
            self.received.extend(batch)
            self.batches += 1

    def tick(self, now_ns: int) -> None:
        self.ticks += 1

    def shutdown(self) -> None:
        pass

    def stats(self) -> dict[str, Any]:
        return {"received": len(self.received)}


def entries(n: int, start: int = 0, session: str = "s1", pad: int = 0) -> list[Entry]:
    return [
        {"event.id": f"{i:032x}", "gen_ai.session.id": session, "seq": i, "pad": "x" * pad}
        for i in range(start, start + n)
    ]


# test_otlp_faults.py: the real OTLP queues under faults

FAST = QueueOptions(
    max_batch=100, backoff_initial=0.05, backoff_max=0.2, tick_interval=0.05, drain_timeout=5.0
)


def entry(i: int) -> dict[str, Any]:
    turn = i // 10
    name = "user.prompt" if i % 10 == 0 else ("llm.response" if i % 10 == 9 else "tool.call")
    out: dict[str, Any] = {
        "event.name": name,
        "event.id": f"{i:032x}",
        "time_unix_nano": 1_800_000_000_000_000_000 + i * 1_000_000,
        "gen_ai.agent.type": "claude-code",
        "gen_ai.session.id": f"s{turn % 4}",
        "gen_ai.turn.id": f"turn-{turn}",
        "seq": i,
    }
    if name == "tool.call":
        out |= {"gen_ai.tool.name": "Bash", "gen_ai.tool.call.id": f"call-{i}"}
    if name == "llm.response":
        out |= {
            "gen_ai.response.id": f"msg-{i}",
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.output_tokens": 7,
        }
    return out


def queues(config: dict[str, Any], tmp: Path, options: QueueOptions = FAST) -> list[QueuedExporter]:
    out = build_otlp_exporters(config, {}, make_paths(tmp), options=options)
    assert all(isinstance(e, QueuedExporter) for e in out)
    return [e for e in out if isinstance(e, QueuedExporter)]


# test_otlp_kills.py: what a receiver got, per request


def resent(requests: list[list[str]]) -> tuple[int, int]:
    """(records received more than once, requests holding a record received before)."""
    seen: set[str] = set()
    duplicates = again = 0
    for ids in requests:
        repeated = [i for i in ids if i in seen]
        duplicates += len(repeated)
        again += bool(repeated)
        seen.update(ids)
    return duplicates, again


def log_requests(receiver: OtlpReceiver) -> list[list[str]]:
    return [[next(kv.value.string_value for kv in r.attributes if kv.key == "event.id")
             for rl in req.resource_logs for sl in rl.scope_logs for r in sl.log_records]
            for req in list(receiver.received.logs)]


def span_requests(receiver: OtlpReceiver) -> list[list[str]]:
    return [[s.span_id.hex() for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
            for req in list(receiver.received.traces)]


def metric_sums(receiver: OtlpReceiver) -> dict[tuple[Any, ...], Any]:
    """Per stream: the sum over its start times of the last value seen with each start time. Within one
    start time a cumulative value never goes down."""
    last: dict[tuple[Any, ...], dict[int, tuple[int, Any]]] = {}
    for p in receiver.metric_points():
        resource = {k: v for k, v in p["resource"].items() if k != "service.instance.id"}  # per installation
        stream = (p["name"], tuple(sorted(p["attributes"].items())), tuple(sorted(resource.items())))
        value = (p["count"], round(p["sum"], 6), tuple(p["buckets"])) if p["kind"] == "histogram" else p["value"]
        starts = last.setdefault(stream, {})
        before = starts.get(p["start"])
        if before is not None and p["time"] >= before[0]:
            assert _key(value) >= _key(before[1]), f"{stream[0]} went down within one start time"
        if before is None or p["time"] >= before[0]:
            starts[p["start"]] = (p["time"], value)
    return {stream: _add([v for _, v in starts.values()]) for stream, starts in last.items()}


def _key(value: Any) -> Any:
    return value[0] if isinstance(value, tuple) else value


def _add(values: list[Any]) -> Any:
    if not isinstance(values[0], tuple):
        return sum(values)
    return (sum(v[0] for v in values), round(sum(v[1] for v in values), 6),
            tuple(map(sum, zip(*(v[2] for v in values), strict=True))))
