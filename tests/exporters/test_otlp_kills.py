"""25 ``kill -9`` of a process feeding the three OTLP signals to a real OTLP/HTTP receiver, against a clean
run of the same input: every log record and span arrives, each duplicated at most once per kill (at most
one resent request per signal per kill), and the sum of every metric equals the clean run's, counting each
stream once per start time (a stream that restarted from zero with a new start time adds up; one that
kept its start time must not count its old total again)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.otlp import log_requests, metric_sums, resent, span_requests
from support.otlp_feed_driver import BATCH
from support.otlp_receiver import OtlpReceiver

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).parent.parent / "support" / "otlp_feed_driver.py"

COUNT = 6000
KILLS = 25
pytestmark = pytest.mark.slow


def run_driver(data: Path, endpoint: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, str(DRIVER), str(data), endpoint, str(COUNT)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    assert result["left"] == [0, 0, 0], result
    return result


def kill_mid_stream(data: Path, receiver: OtlpReceiver, rng: random.Random) -> bool:
    """Start the driver, let ``receiver`` answer a few more requests, kill -9; False if it finished first."""
    proc = run_driver(data, receiver.endpoint)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "started"
        target = receiver.requests + rng.randint(3, 40)
        deadline = time.monotonic() + 60
        while receiver.requests < target and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    return proc.returncode == -signal.SIGKILL


def test_25_kill_9_duplicate_at_most_once_per_kill_and_metrics_equal_a_clean_run(tmp_path: Path) -> None:
    clean = OtlpReceiver().start()
    killed = OtlpReceiver().start()
    try:
        finish(run_driver(tmp_path / "clean", clean.endpoint))
        rng = random.Random(22)
        kills = 0
        while kills < KILLS:
            assert kill_mid_stream(tmp_path / "killed", killed, rng), f"the input ran out after {kills} kills"
            kills += 1
        stats = finish(run_driver(tmp_path / "killed", killed.endpoint))["stats"]

        clean_logs, killed_logs = log_requests(clean), log_requests(killed)
        assert sorted({i for r in killed_logs for i in r}) == sorted(i for r in clean_logs for i in r)
        assert len({i for r in killed_logs for i in r}) == COUNT
        log_dups, log_again = resent(killed_logs)
        span_dups, span_again = resent(span_requests(killed))
        assert {i for r in span_requests(killed) for i in r} == {i for r in span_requests(clean) for i in r}
        assert resent(clean_logs) == (0, 0) and resent(span_requests(clean)) == (0, 0)
        print(f"\n{KILLS} kills: {log_dups} duplicate log records in {log_again} requests, {span_dups} duplicate "
              f"spans in {span_again} requests; requeued skipped "
              f"{sum(s['requeued_skipped'] for s in stats.values())}")
        assert log_again <= KILLS and log_dups <= KILLS * BATCH
        assert span_again <= KILLS and span_dups <= KILLS * BATCH

        # a stream's identity includes its resource: one service.instance.id across all 26 processes
        assert len({p["resource"].get("service.instance.id") for p in killed.metric_points()}) == 1
        expected, got = metric_sums(clean), metric_sums(killed)
        assert expected, "the clean run sent no metrics"
        wrong = {s[0]: (got.get(s), v) for s, v in expected.items() if got.get(s) != v}
        assert not wrong and got.keys() == expected.keys(), wrong
        for name in ("agent_collector.tool.calls", "agent_collector.sessions", "gen_ai.client.token.usage"):
            assert any(s[0] == name for s in expected), name
    finally:
        clean.stop()
        killed.stop()
