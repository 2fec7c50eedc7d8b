"""Real Claude Code 2.1.332 with its own OpenTelemetry switched on by `agent-collector install --telemetry`
(the `env` of its settings.json, no token in it), against the fake Anthropic server, the daemon up: the
CLI's OTLP requests (chunked OTLP/JSON logs) reach our receiver without the token, are spooled, and are
counted in the live status; `uninstall` gives settings.json back byte for byte."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from collector_e2e import collector, collector_env, data_dir
from fake_llm import FakeLLMServer
from harness import AgentHome, describe, run_scenario, write_agent_config
from support import ROOT
from support.waits import free_port, wait_for, wait_listening

pytestmark = pytest.mark.e2e
AGENT = "claude-code"


def _live_status(env: AgentHome, port: int) -> dict[str, Any]:
    token = (data_dir(env) / "state" / "ingest.token").read_text().strip()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/status", headers={"X-Agent-Collector-Token": token})
    with urllib.request.urlopen(request, timeout=10) as response:
        result: dict[str, Any] = json.loads(response.read())
    return result


def _spooled(env: AgentHome) -> list[dict[str, Any]]:
    folder = data_dir(env) / "spool" / "otlp" / AGENT
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines() if line]


def test_install_telemetry_sends_claude_codes_own_otlp_to_the_daemon(
        e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    port = free_port()
    write_agent_config(AGENT, agent_home.home, agent_home.workdir, fake_llm)
    settings = agent_home.home / ".claude" / "settings.json"
    before = settings.read_bytes() if settings.exists() else None
    collector(agent_home.home, "install", "--agent", AGENT, "--telemetry", port=port)
    env_set = json.loads(settings.read_text())["env"]
    assert env_set["OTEL_EXPORTER_OTLP_ENDPOINT"] == f"http://127.0.0.1:{port}"
    token = (data_dir(agent_home) / "state" / "ingest.token").read_text().strip()
    assert token not in settings.read_text()
    proc = subprocess.Popen([sys.executable, "-m", "collector", "run"], cwd=ROOT,
                            env=collector_env(agent_home.home, port), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_listening(port)
        results = run_scenario(AGENT, "tool_then_answer", agent_home.home, agent_home.workdir, fake_llm,
                               log_dir=agent_home.root)
        assert all(r.returncode == 0 for r in results), describe(results)
        source = f"{AGENT}:telemetry"
        wait_for(lambda: _live_status(agent_home, port)["sources"][source]["otel_records"] > 0, timeout=30,
                 what="the daemon reading the telemetry back from its spool")
        status = _live_status(agent_home, port)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err.decode()[-3000:]
    lines = _spooled(agent_home)
    assert lines, "Claude Code's OTLP requests were spooled"
    events = [r.get("eventName") or (r.get("body") or {}).get("stringValue")
              for line in lines if line["event"] == "logs"
              for res in line["payload"]["export"]["resourceLogs"] for scope in res["scopeLogs"]
              for r in scope["logRecords"]]
    assert "claude_code.api_request" in events, events
    assert status["otlp"]["records"][AGENT] >= len(events) > 0
    assert status["ingest"]["requests"].get("otlp_same_user", 0) >= 1  # no token: our own user's client
    collector(agent_home.home, "uninstall", "--agent", AGENT, port=port)
    assert (settings.read_bytes() if settings.exists() else None) == before
