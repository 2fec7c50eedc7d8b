"""OTLP under faults: the backend goes down mid-stream, the queue cap is reached, the process is killed."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.otlp import entry, queues
from support.otlp_receiver import OtlpReceiver
from support.waits import free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver().start()
    yield r
    r.stop()


def assert_duplicates_identical(
    records: list[dict[str, Any]], key: str, ignore: tuple[str, ...] = ()
) -> dict[str, dict[str, Any]]:
    """Duplicates are allowed only as copies: same id, same content (``ignore``: fields a re-read renews)."""
    seen: dict[str, dict[str, Any]] = {}
    for record in records:
        ident = record["attributes"][key] if key in record["attributes"] else record[key]
        if ident in seen:
            a, b = ({k: v for k, v in r.items() if k not in ignore} for r in (seen[ident], record))
            assert a == b, f"duplicate {ident} differs"
        seen[ident] = record
    return seen


def test_backend_down_while_1000_entries_flow(receiver: OtlpReceiver, tmp_path: Path) -> None:
    config = {"endpoint": receiver.endpoint, "timeout": 0.5, "turn_grace": 0, "turn_idle_timeout": 0.5}
    exporters = queues(config, tmp_path)
    for start in range(0, 1000, 20):
        if start == 300:
            receiver.stop()
        if start == 700:
            wait_for(lambda: all(e.stats()["backend_up"] is False for e in exporters), 30)
            assert all(e.stats()["queued"] > 0 for e in exporters if e.name.endswith("logs"))
            receiver.start()  # same port
        batch = [entry(i) for i in range(start, start + 20)]
        began = time.monotonic()
        for exporter in exporters:
            exporter.export(batch)  # never blocks on the dead backend
        assert time.monotonic() - began < 2.0  # an append each; delivery (with its retries) is the threads'
    wait_for(lambda: all(not e.stats()["queued"] for e in exporters), 30)
    wait_for(lambda: all(not e.stats()["inner"].get("open_turns") for e in exporters), 30)
    wait_for(lambda: all(not e.stats()["inner"].get("outbox_spans") for e in exporters), 30)
    stats = {e.name: e.stats() for e in exporters}
    for exporter in exporters:
        exporter.shutdown()

    logs = assert_duplicates_identical(receiver.logs(), "event.id")
    assert sorted(logs) == [f"{i:032x}" for i in range(1000)], "every record arrived"
    spans = receiver.spans()
    unique: dict[str, dict[str, Any]] = {}
    for span in spans:
        unique.setdefault(span["span_id"], span)
        assert unique[span["span_id"]] == span, "a duplicate span differs from the first copy"
    roots = [s for s in unique.values() if s["parent_id"] is None]
    assert sorted(r["attributes"]["gen_ai.turn.id"] for r in roots) == sorted(f"turn-{t}" for t in range(100))
    tokens_in = [int(s["attributes"].get("gen_ai.usage.input_tokens", 0)) for s in unique.values()]
    assert sum(tokens_in) == 100 * 100
    points = receiver.latest_metric_points()
    tokens = [p for p in points if p["name"] == "gen_ai.client.token.usage"]
    assert sum(p["sum"] for p in tokens if p["attributes"]["gen_ai.token.type"] == "input") == 100 * 100
    assert all(s["dropped"] == 0 and s["failures"] > 0 for s in stats.values()), stats


def test_cap_drops_oldest_counts_and_breaks_nothing(
    receiver: OtlpReceiver, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    healthy = OtlpReceiver().start()
    receiver.stop()  # the first backend is down from the start
    config = {
        "endpoint": receiver.endpoint,
        "signals": ["logs"],
        "timeout": 0.3,
        "queue_max_mb": 0.05,  # about 52 kB
        "backends": [
            {"name": "healthy", "endpoint": healthy.endpoint, "signals": ["logs"], "queue_max_mb": 64}
        ],
    }
    try:
        down, up = sorted(queues(config, tmp_path), key=lambda q: q.name)
        assert (down.name, up.name) == ("otlp-default-logs", "otlp-healthy-logs")
        with caplog.at_level(logging.ERROR, logger="collector.exporters.queue"):
            for start in range(0, 1000, 20):
                batch = [entry(i) for i in range(start, start + 20)]
                down.export(batch)
                up.export(batch)
        stats = down.stats()
        assert stats["dropped"] > 0 and stats["queued_bytes"] <= 52_428
        assert stats["queued"] + stats["dropped"] == 1000
        assert any("dropped the" in r.message for r in caplog.records)
        assert up.flush(20) and len(healthy.logs()) == 1000  # the other backend never noticed
        receiver.start()
        assert down.flush(20)
        arrived = [int(r["attributes"]["seq"]) for r in receiver.logs()]
        assert arrived == list(range(1000 - len(arrived), 1000)), "only the oldest went missing, order kept"
        assert len(arrived) == stats["queued"]
        assert down.stats()["dropped"] == stats["dropped"]
        down.shutdown()
        up.shutdown()
    finally:
        healthy.stop()


def test_slow_backend_does_not_stall_another(receiver: OtlpReceiver, tmp_path: Path) -> None:
    slow = OtlpReceiver().start()
    slow.delay_s = 1.0
    config = {
        "endpoint": slow.endpoint,
        "signals": ["logs"],
        "timeout": 5,
        "backends": [{"name": "fast", "endpoint": receiver.endpoint, "signals": ["logs"]}],
    }
    try:
        slow_q, fast_q = sorted(queues(config, tmp_path), key=lambda q: q.name)
        began = time.monotonic()
        for start in range(0, 200, 20):
            batch = [entry(i) for i in range(start, start + 20)]
            slow_q.export(batch)
            fast_q.export(batch)
        assert time.monotonic() - began < 5.0  # ten batches through the 1 s backend would be 10 s
        assert fast_q.flush(5) and len(receiver.logs()) == 200
        assert slow_q.stats()["queued"] > 0  # still working through it
        slow.delay_s = 0.0
        assert slow_q.flush(20)
        slow_q.shutdown()
        fast_q.shutdown()
    finally:
        slow.stop()


def test_kill_9_while_queued_then_restart_delivers(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there yet: the backend is down
    endpoint = f"http://127.0.0.1:{port}"
    driver = Path(__file__).parent.parent / "support" / "otlp_kill_driver.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(driver), str(tmp_path), endpoint, "500"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "queued 500"
        # the delivery threads failed a few times (and persisted half-built turns): kill it then
        assert proc.stdout.readline().strip() == "failed"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    receiver = OtlpReceiver(port).start()
    try:
        done = subprocess.run(
            [sys.executable, str(driver), str(tmp_path), endpoint, "--deliver"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        stats = json.loads(done.stdout.strip().splitlines()[-1])
        logs = assert_duplicates_identical(receiver.logs(), "event.id")
        assert sorted(logs) == [f"{i:032x}" for i in range(500)]
        spans: dict[str, dict[str, Any]] = {}
        for span in receiver.spans():
            assert spans.setdefault(span["span_id"], span) == span
        roots = [s for s in spans.values() if s["parent_id"] is None]
        assert len(roots) == 50 and len(spans) == 500
        assert all(s["queued"] == 0 and s["dropped"] == 0 for s in stats.values()), stats
    finally:
        receiver.stop()


def test_daemon_kill_9_with_otlp_queued_then_restart_delivers(tmp_path: Path) -> None:
    """The real daemon (`agent-collector run`) with its OTLP endpoint down is killed -9 once the entries
    sit in its OTLP queue; `collect --once` after the backend is back delivers every one of them."""
    session = "0b8f1c1e-0000-4000-8000-0000000000aa"
    spool = tmp_path / "data" / "spool" / "claude-code"
    spool.mkdir(parents=True)
    lines = [
        {
            "ts": 1796037000.0,
            "agent": "claude-code",
            "event": "SessionStart",
            "payload": {"session_id": session, "hook_event_name": "SessionStart", "source": "startup"},
        }
    ]
    for i in range(150):
        base = {
            "session_id": session,
            "tool_name": "Bash",
            "tool_use_id": f"toolu_{i:06d}",
            "prompt_id": "p1",
            "tool_input": {"command": f"echo {i}"},
        }
        lines.append(
            {
                "ts": 1796037001.0 + i / 100,
                "agent": "claude-code",
                "event": "PreToolUse",
                "payload": {**base, "hook_event_name": "PreToolUse"},
            }
        )
        lines.append(
            {
                "ts": 1796037001.005 + i / 100,
                "agent": "claude-code",
                "event": "PostToolUse",
                "payload": {
                    **base,
                    "hook_event_name": "PostToolUse",
                    "tool_response": {"stdout": str(i)},
                    "duration_ms": 3,
                },
            }
        )
    (spool / "claude-code-2026-11-30.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    home, out = tmp_path / "home", tmp_path / "out"
    home.mkdir()
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "AGENT_COLLECTOR_DATA_DIR": str(tmp_path / "data"),
        "AGENT_COLLECTOR_CONFIG_DIR": str(tmp_path / "cfg"),
        "AGENT_COLLECTOR_INGEST__ENABLED": "false",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "300",
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
    }
    queue = tmp_path / "data" / "queue" / "otlp" / "default"  # the backend's one log, for all its signals
    proc = subprocess.Popen(
        [sys.executable, "-m", "collector", "run", "--home", str(home), "--output", str(out)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            queued = (
                sum(p.read_bytes().count(b"\n") for p in queue.glob("seg-*.jsonl")) if queue.exists() else 0
            )
            if queued >= len(lines):
                break
            time.sleep(0.02)
        assert queued >= len(lines), f"only {queued} entries reached the OTLP queue"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    written = [json.loads(x) for p in sorted(out.glob("*.jsonl")) for x in p.read_text().splitlines() if x]
    receiver = OtlpReceiver(port).start()
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "collector",
                "collect",
                "--once",
                "--home",
                str(home),
                "--output",
                str(out),
                "-q",
            ],
            env=env,
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr.decode()
        # entries the killed daemon had not checkpointed are read again: same ids and content, only the
        # observed time (when the collector read them) is new
        logs = assert_duplicates_identical(receiver.logs(), "event.id", ignore=("observed_time",))
        assert set(logs) >= {e["event.id"] for e in written} and len(written) >= len(lines)
    finally:
        receiver.stop()
