"""kill -9 of the real daemon in the middle of ingest, then a restart: every event exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support import assert_no_duplicates, read_output

N_TOOLS = 3000  # 6000 hook lines -> 6000 entries (plus session start)


def write_spool(spool: Path) -> int:
    spool.mkdir(parents=True)
    session = "0b8f1c1e-0000-4000-8000-000000000001"
    lines = [{"ts": 1796037000.0, "agent": "claude-code", "event": "SessionStart",
              "payload": {"session_id": session, "hook_event_name": "SessionStart", "source": "startup"}}]
    for i in range(N_TOOLS):
        base = {"session_id": session, "tool_name": "Bash", "tool_use_id": f"toolu_{i:06d}",
                "tool_input": {"command": f"echo {i}"}, "prompt_id": "p1"}
        lines.append({"ts": 1796037001.0 + i / 1000, "agent": "claude-code", "event": "PreToolUse",
                      "payload": {**base, "hook_event_name": "PreToolUse"}})
        lines.append({"ts": 1796037001.0 + i / 1000 + 0.0005, "agent": "claude-code", "event": "PostToolUse",
                      "payload": {**base, "hook_event_name": "PostToolUse", "tool_response": {"stdout": str(i)},
                                  "duration_ms": 3}})
    with (spool / "claude-code-2026-11-30.jsonl").open("w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    return len(lines)


def test_kill_9_mid_ingest_then_restart(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    data = tmp_path / "data"
    expected = write_spool(data / "spool" / "claude-code")
    out = tmp_path / "out"
    env = {**os.environ, "AGENT_COLLECTOR_DATA_DIR": str(data), "AGENT_COLLECTOR_CONFIG_DIR": str(tmp_path / "cfg"),
           "AGENT_COLLECTOR_COLLECTOR__BATCH_SIZE": "50", "AGENT_COLLECTOR_INGEST__ENABLED": "false"}
    cmd = [sys.executable, "-m", "collector", "run", "--home", str(home), "--output", str(out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            lines = sum(p.read_bytes().count(b"\n") for p in out.glob("*.jsonl")) if out.exists() else 0
            if lines >= 300:
                break
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    partial = read_output(out)
    assert 0 < len(partial) < expected, f"the kill should land mid-ingest ({len(partial)} of {expected})"

    done = subprocess.run([sys.executable, "-m", "collector", "collect", "--once", "--home", str(home),
                           "--output", str(out), "-q"], env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    entries = read_output(out)
    assert_no_duplicates(entries)
    assert len([e for e in entries if e["event.name"] != "session.status"]) == expected
    ids = {e["gen_ai.tool.call.id"] for e in entries if e["event.name"] == "tool.result"}
    assert len(ids) == N_TOOLS


def test_sigterm_flushes_and_stops_within_5s(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_spool(data / "spool" / "claude-code")
    env = {**os.environ, "AGENT_COLLECTOR_DATA_DIR": str(data), "AGENT_COLLECTOR_CONFIG_DIR": str(tmp_path / "cfg"),
           "AGENT_COLLECTOR_INGEST__ENABLED": "false"}
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "collector", "run", "--home", str(tmp_path), "--output", str(out)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not list(out.glob("*.jsonl")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    started = time.monotonic()
    code = proc.wait(10)
    assert time.monotonic() - started < 5
    assert code == 0, proc.stderr.read().decode() if proc.stderr else ""
    assert (data / "state" / "status.json").exists()
