"""The real daemon (`agent-collector run`) reading a large hook spool with OTLP on (logs, traces, metrics to
a real OTLP/HTTP receiver), killed -9 25 times mid-ingest, against a clean run of the same spool: every
log record arrives, log records and spans are duplicated at most one request per signal per kill, and
every metric's sum (each stream once per start time) equals the clean run's."""

from __future__ import annotations

import json
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from support import read_output
from support.otlp import metric_sums, resent, span_requests
from support.otlp_receiver import OtlpReceiver
from support.robust import Daemon

KILLS = 25
SESSIONS = 4
TOOLS = 300  # per session: a prompt every 5 tool calls
CHUNK = 40  # spool lines an agent appends at a time
pytestmark = pytest.mark.slow


def spool_lines() -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    ts = 1796037000.0
    for s in range(SESSIONS):
        session = f"0b8f1c1e-0000-4000-8000-{s:012d}"
        lines.append({"ts": ts, "agent": "claude-code", "event": "SessionStart",
                      "payload": {"session_id": session, "hook_event_name": "SessionStart", "source": "startup"}})
        for i in range(TOOLS):
            ts += 0.01
            if i % 5 == 0:
                lines.append({"ts": ts, "agent": "claude-code", "event": "UserPromptSubmit",
                              "payload": {"session_id": session, "hook_event_name": "UserPromptSubmit",
                                          "prompt": f"step {i}"}})
            base = {"session_id": session, "tool_name": ("Bash", "Read")[i % 2], "tool_use_id": f"toolu_{s}_{i:06d}",
                    "tool_input": {"command": f"echo {i}"}}
            lines.append({"ts": ts, "agent": "claude-code", "event": "PreToolUse",
                          "payload": {**base, "hook_event_name": "PreToolUse"}})
            lines.append({"ts": ts + 0.005, "agent": "claude-code", "event": "PostToolUse",
                          "payload": {**base, "hook_event_name": "PostToolUse", "tool_response": {"stdout": str(i)},
                                      "duration_ms": 3}})
    return lines


def daemon(tmp: Path, receiver: OtlpReceiver) -> Daemon:
    tmp.mkdir()
    d = Daemon(tmp, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "AGENT_COLLECTOR_INGEST__ENABLED": "false",
                     "AGENT_COLLECTOR_OTLP__TURN_GRACE": "0"})
    (d.data / "spool" / "claude-code").mkdir(parents=True, exist_ok=True)
    return d


def append(d: Daemon, lines: list[dict[str, Any]]) -> None:
    """What a hook does: whole lines appended to the agent's spool file."""
    with open(d.data / "spool" / "claude-code" / "claude-code-2026-11-30.jsonl", "a") as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))


def wait_requests(receiver: OtlpReceiver, more: int, timeout: float) -> None:
    target, deadline = receiver.requests + more, time.monotonic() + timeout
    while receiver.requests < target and time.monotonic() < deadline:
        time.sleep(0.001)


def log_ids(receiver: OtlpReceiver) -> list[list[str]]:
    return [[next(kv.value.string_value for kv in r.attributes if kv.key == "event.id")
             for rl in req.resource_logs for sl in rl.scope_logs for r in sl.log_records]
            for req in list(receiver.received.logs)]


def run_to_the_end(d: Daemon, receiver: OtlpReceiver) -> list[dict[str, Any]]:
    """Start, wait until the output holds every entry and the receiver every one of them as a log record
    with the metrics sent after it, then stop."""
    d.start_quiet()
    try:
        entries = d.wait_output(lambda es: len({e["event.id"] for e in es}) >= expected_entries(es), 120)
        want = {e["event.id"] for e in read_output(d.out)}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not want <= {i for r in log_ids(receiver) for i in r}:
            time.sleep(0.05)
        assert want <= {i for r in log_ids(receiver) for i in r}
    finally:
        assert d.stop() == 0
    return entries


def expected_entries(entries: list[dict[str, Any]]) -> int:
    return SESSIONS * (1 + TOOLS * 2 + TOOLS // 5) if entries else 1


def test_the_daemon_killed_25_times_mid_ingest_with_otlp_on(tmp_path: Path) -> None:
    clean, killed = OtlpReceiver().start(), OtlpReceiver().start()
    daemons: list[Daemon] = []
    try:
        t0 = time.monotonic()
        lines = spool_lines()
        first = daemon(tmp_path / "clean", clean)
        daemons.append(first)
        append(first, lines)
        clean_entries = run_to_the_end(first, clean)
        print(f"\nclean run {time.monotonic() - t0:.1f}s, {len(clean_entries)} entries")
        d = daemon(tmp_path / "killed", killed)
        daemons.append(d)
        rng = random.Random(22)
        left = list(lines)
        for _ in range(KILLS):  # the agent goes on writing while the daemon is killed mid-delivery
            d.start_quiet()
            append(d, left[:CHUNK])
            wait_requests(killed, 1, 10)
            append(d, left[CHUNK : 2 * CHUNK])
            left = left[2 * CHUNK :]
            wait_requests(killed, rng.randint(1, 8), 5)
            assert d.proc is not None and d.proc.poll() is None, d.log()[-2000:]
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait(10)
        assert left, "the spool ran out before the last kill"
        append(d, left)
        entries = run_to_the_end(d, killed)
        print(f"killed run done at {time.monotonic() - t0:.1f}s")
        assert sorted({e["event.id"] for e in entries}) == sorted(e["event.id"] for e in clean_entries)
        clean_logs, killed_logs = log_ids(clean), log_ids(killed)
        assert {i for r in killed_logs for i in r} == {i for r in clean_logs for i in r}
        log_dups, log_again = resent(killed_logs)
        span_dups, span_again = resent(span_requests(killed))
        print(f"{KILLS} daemon kills: {log_dups} duplicate log records in {log_again} requests, {span_dups} "
              f"duplicate spans in {span_again} requests")
        assert resent(clean_logs) == (0, 0)
        assert log_again <= KILLS and span_again <= KILLS
        expected, got = metric_sums(clean), metric_sums(killed)
        wrong = {s[0]: (got.get(s), v) for s, v in expected.items() if got.get(s) != v}
        totals: dict[str, int] = {}
        for stream, value in expected.items():
            totals[stream[0]] = totals.get(stream[0], 0) + (value[0] if isinstance(value, tuple) else value)
        print("metric sums", totals)
        assert not wrong and got.keys() == expected.keys(), wrong
    finally:
        for one in daemons:  # none is left behind by a failure
            if one.proc is not None and one.proc.poll() is None:
                one.proc.kill()
                one.proc.wait(10)
        clean.stop()
        killed.stop()
