"""The metric exporter's cumulative series across restarts: restored with their values, start times and
the resource's service.instance.id from the checkpoint store; an unreadable state starts every series
from zero with a new start time (never a new start time with the old total)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

from collector.exporters.otlp_common import ResourceCache
from collector.exporters.otlp_metrics import OtlpMetricsExporter
from collector.state.checkpoints import CheckpointStore, KeyState


class Capture:
    endpoint = "capture"

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def send(self, body: bytes, what: str) -> None:
        self.bodies.append(body)

    def close(self) -> None:
        pass


def points(body: bytes) -> dict[str, tuple[int, Any, str]]:
    """metric name + attributes -> (start time, value, service.instance.id)."""
    request = ExportMetricsServiceRequest()
    request.ParseFromString(body)
    out = {}
    for rm in request.resource_metrics:
        instance = next(kv.value.string_value for kv in rm.resource.attributes if kv.key == "service.instance.id")
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                kind = metric.WhichOneof("data")
                for p in getattr(metric, kind).data_points:
                    attrs = ",".join(sorted(f"{kv.key}={kv.value.string_value}" for kv in p.attributes))
                    value = (p.count, p.sum, list(p.bucket_counts)) if kind == "histogram" else p.as_int
                    out[f"{metric.name}|{attrs}"] = (p.start_time_unix_nano, value, instance)
    return out


def batch(start: int, n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(start, start + n):
        base = {"event.id": f"e{i}", "gen_ai.agent.type": "claude-code"}
        out.append({**base, "event.name": "tool.result", "gen_ai.tool.name": "Bash"})
        out.append({**base, "event.id": f"l{i}", "event.name": "llm.response", "gen_ai.usage.input_tokens": 10 + i,
                    "gen_ai.usage.output_tokens": 3, "duration_ms": 250})
    return out


def exporter(store: CheckpointStore) -> tuple[OtlpMetricsExporter, Capture]:
    sender = Capture()
    return OtlpMetricsExporter("otlp-t-metrics", sender, ResourceCache(), state=KeyState(store, "exporter.m")), sender


def test_series_resume_with_their_value_start_time_and_instance(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "cp.sqlite")
    first, sent = exporter(store)
    first.export(batch(0, 5))
    first.checkpoint({"segment": 1, "offset": 500})
    before = points(sent.bodies[-1])
    # a second process (a restart): the same streams go on from the saved totals
    second, sent2 = exporter(CheckpointStore(tmp_path / "cp.sqlite"))
    assert second.restored_position() == {"segment": 1, "offset": 500}
    second.export(batch(5, 5))
    after = points(sent2.bodies[-1])
    assert after.keys() == before.keys()
    for key, (start, _value, instance) in after.items():
        assert (start, instance) == before[key][:1] + before[key][2:], key
    tools = next(k for k in after if k.startswith("agent_collector.tool.calls"))
    assert (before[tools][1], after[tools][1]) == (5, 10)
    tokens = next(k for k in after if k.startswith("gen_ai.client.token.usage") and "input" in k)
    assert after[tokens][1][0] == 10 and after[tokens][1][1] == sum(10 + i for i in range(10))


def test_unreadable_state_starts_from_zero_with_a_new_start_time(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "cp.sqlite")
    first, sent = exporter(store)
    first.export(batch(0, 5))
    first.checkpoint({"segment": 1, "offset": 500})
    before = points(sent.bodies[-1])
    store.put({"exporter.m": {"meters": [{"resource": ["h"], "series": {}}], "position": {"segment": 1}}})
    second, sent2 = exporter(store)
    second.export(batch(5, 2))
    after = points(sent2.bodies[-1])
    tools = next(k for k in after if k.startswith("agent_collector.tool.calls"))
    assert after[tools][1] == 2 and after[tools][0] > before[tools][0]
    assert second.restored_position() is None
