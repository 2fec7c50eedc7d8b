"""Poison for OTLP is a permanent error: an entry protobuf cannot carry (a pre-1970 time or a lone UTF-16
surrogate, given to the exporters directly, past the pipeline's boundary) is left out, counted and written
to the quarantine file with its reason; the others reach a real OTLP/HTTP receiver, and the batch is not
retried forever as if the backend were down."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import make_paths
from support.otlp import FAST, entry, queues
from support.otlp_receiver import OtlpReceiver
from support.waits import wait_for

from collector.exporters.otlp import build_otlp_exporters
from collector.exporters.queue import QueuedExporter
from collector.model.boundary import check_entry
from collector.pipeline.quarantine import Quarantine, listing, quarantine_dir


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver().start()
    yield r
    r.stop()


def test_an_unencodable_entry_is_dropped_and_the_rest_flows(receiver: OtlpReceiver, tmp_path: Path) -> None:
    config = {"endpoint": receiver.endpoint, "timeout": 2, "turn_grace": 0, "turn_idle_timeout": 0.2}
    exporters = queues(config, tmp_path)
    batch = [entry(i) for i in range(450)]
    batch[201]["time_unix_nano"] = -1_000_000_000  # 1969: no fixed64 holds it
    for exporter in exporters:
        exporter.export(batch)
    wait_for(lambda: all(not e.stats()["queued"] for e in exporters), 30)
    wait_for(lambda: all(not e.stats()["inner"].get("outbox_spans") for e in exporters), 30)
    stats = {e.name.rsplit("-", 1)[-1]: e.stats() for e in exporters}
    for exporter in exporters:
        exporter.shutdown()
    ids = {r["attributes"]["event.id"] for r in receiver.logs()}
    assert ids == {f"{i:032x}" for i in range(450)} - {f"{201:032x}"}
    assert stats["logs"]["inner"]["unencodable"] == 1
    assert stats["traces"]["inner"]["rejected_spans"] >= 1
    assert receiver.spans(), "the other turns' spans were delivered"


def test_the_boundary_makes_the_same_entry_deliverable() -> None:
    poisoned = {"schema.version": "1.0", **entry(201), "observed_time_unix_nano": 1_800_000_000_000_000_000}
    poisoned["time_unix_nano"] = -1_000_000_000
    check_entry(poisoned)
    assert poisoned["time_unix_nano"] == poisoned["observed_time_unix_nano"]
    assert poisoned["collector.time_replaced"] == "out_of_range"


def test_the_unencodable_entry_is_in_the_quarantine_file_with_its_reason(
    receiver: OtlpReceiver, tmp_path: Path
) -> None:
    config = {"endpoint": receiver.endpoint, "timeout": 2, "turn_grace": 0, "turn_idle_timeout": 0.2}
    shared = Quarantine(quarantine_dir(make_paths(tmp_path)))  # the daemon's: `status` counts from it
    exporters = [e for e in build_otlp_exporters(config, {}, make_paths(tmp_path), options=FAST, quarantine=shared)
                 if isinstance(e, QueuedExporter)]
    batch = [entry(i) for i in range(100)]
    batch[31]["time_unix_nano"] = -1_000_000_000  # before 1970: no fixed64
    batch[49]["gen_ai.usage.input_tokens"] = 2**63  # an llm.response: JSON holds it, int64 does not
    batch[60]["gen_ai.tool.name"] = "cut emoji \ud83d"  # a lone surrogate: not even JSON
    poisoned = {f"{i:032x}" for i in (31, 49, 60)}
    for exporter in exporters:
        exporter.export(batch)
    wait_for(lambda: all(not e.stats()["queued"] for e in exporters), 30)
    wait_for(lambda: all(not e.stats()["inner"].get("outbox_spans") for e in exporters), 30)
    for exporter in exporters:
        exporter.shutdown()
    lines = listing(quarantine_dir(make_paths(tmp_path)))
    by_exporter: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        assert line["stage"] == "export" and "data" not in line
        by_exporter.setdefault(line["meta"]["exporter"], []).append(line)
    logs = {line["meta"]["event.id"]: line["reason"] for line in by_exporter.pop("otlp-default-logs")}
    assert set(logs) == poisoned  # each once: the queue refused the surrogate for all signals at its door
    assert "fixed64 out of range" in logs[f"{31:032x}"] and "int outside int64" in logs[f"{49:032x}"]
    assert "not JSON-serialisable" in logs[f"{60:032x}"]
    spans = by_exporter.pop("otlp-default-traces")
    assert spans and all("otlp.span.id" in line["meta"] for line in spans), "spans quarantined by span id"
    assert not by_exporter, "metrics carry neither times nor raw token values as attributes"
    counted = shared.stats()
    assert counted["records"] == len(lines), "status counts what the OTLP exporters quarantined"
    assert any("fixed64 out of range" in why for reasons in counted["by_source"].values() for why in reasons)
    ids = {r["attributes"]["event.id"] for r in receiver.logs()}
    assert ids == {f"{i:032x}" for i in range(100)} - poisoned
    turns = [p for p in receiver.metric_points() if p["name"] == "agent_collector.turns"]
    assert turns, "metrics of the other entries flowed"


def test_a_pre_1970_time_through_the_real_daemon_with_otlp_on(receiver: OtlpReceiver, tmp_path: Path) -> None:
    """The row end to end: a real Claude Code capture with one line dated 1969, the real daemon, OTLP on:
    every entry reaches the backend (none taken for "endpoint down"), each once, the daemon answers."""
    import json
    import shutil

    from support import FIXTURES, assert_no_duplicates, read_output
    from support.robust import Daemon

    case = FIXTURES / "claude-code" / "two_tools"
    daemon = Daemon(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_METRICS_EXPORTER": "none",
                               "AGENT_COLLECTOR_OTLP__TURN_GRACE": "0"})
    shutil.rmtree(daemon.home)
    shutil.copytree(case / "home", daemon.home, symlinks=True)
    shutil.copytree(case / "spool", daemon.data / "spool")
    [transcript] = daemon.home.glob(".claude/projects/*/*.jsonl")
    lines = [json.loads(x) for x in transcript.read_text().splitlines()]
    first = next(x for x in lines if x.get("type") == "assistant")
    first["timestamp"] = "1969-07-20T20:17:40Z"
    transcript.write_text("".join(json.dumps(x) + "\n" for x in lines))
    expected = sum(json.loads((case / "expected.json").read_text())["counts"].values())
    daemon.start()
    try:
        entries = daemon.wait_output(lambda es: len(es) >= expected)
        wait_for(lambda: {r["attributes"].get("event.id") for r in receiver.logs()} >= {
            e["event.id"] for e in read_output(daemon.out)}, 30)
        assert daemon.get("/v1/status")
        logs = daemon.get("/v1/status")["exporters"]["otlp-default-logs"]
    finally:
        assert daemon.stop() == 0
    entries = read_output(daemon.out)
    assert_no_duplicates(entries)
    assert len(entries) == expected
    sent = [r["attributes"].get("event.id") for r in receiver.logs()]
    assert sorted(sent) == sorted(e["event.id"] for e in entries), "every entry at the backend, once"
    assert logs["rejected"] == 0 and logs["inner"].get("unencodable", 0) == 0
    assert all(e["time_unix_nano"] > 0 for e in entries)
