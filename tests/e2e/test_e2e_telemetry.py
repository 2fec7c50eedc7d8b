"""Real Claude Code, Codex and Qwen Code with their own OpenTelemetry switched on by `agent-collector
install --telemetry` (Claude Code's `env` in settings.json, Codex's `[otel]`, Qwen Code's `telemetry`; no
token in any), against the fake model server, the daemon up: each CLI's OTLP requests reach our receiver
without the token, are spooled, counted in the live status and read back by the agent's telemetry source;
`report` counts every model call once with the server's tokens (files and telemetry merged, docs/merge.md);
`uninstall` gives the config file back byte for byte (Qwen Code rewrites its own settings.json on start,
adding `$version`: there the settings as they were, Qwen's own change kept)."""

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
CONFIG = {"claude-code": ".claude/settings.json", "codex": ".codex/config.toml", "qwen-code": ".qwen/settings.json"}


def _live_status(env: AgentHome, port: int) -> dict[str, Any]:
    token = (data_dir(env) / "state" / "ingest.token").read_text().strip()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/status", headers={"X-Agent-Collector-Token": token})
    with urllib.request.urlopen(request, timeout=10) as response:
        result: dict[str, Any] = json.loads(response.read())
    return result


def _spooled_events(env: AgentHome, agent: str) -> set[Any]:
    """Every name a log record carries: ``eventName``, an ``event.name`` attribute, a string body."""
    folder = data_dir(env) / "spool" / "otlp" / agent
    lines = [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines() if line]
    records = [r for line in lines if line["event"] == "logs" for res in line["payload"]["export"]["resourceLogs"]
               for scope in res["scopeLogs"] for r in scope["logRecords"]]
    names = {r.get("eventName") for r in records} | {(r.get("body") or {}).get("stringValue") for r in records}
    names |= {a["value"].get("stringValue") for r in records for a in r.get("attributes", [])
              if a.get("key") == "event.name"}
    return names - {None}


def _served_totals(server: FakeLLMServer) -> tuple[int, ...]:
    """(calls, input incl. cached, output, cache reads, cache writes) the model server sent."""
    from support import usage_tuple

    parts = [usage_tuple(r["api"], r["usage"]) for r in server.responses if r.get("kind") == "response_usage"]
    return (len(parts), *(sum(p[i] for p in parts) for i in range(4)))


def _session_totals(env: AgentHome) -> tuple[int, ...] | None:
    rows = json.loads(collector(env.home, "report", "session", "--json", "--timezone", "UTC").stdout)["rows"]
    if len(rows) != 1:
        return None
    return tuple(rows[0][k] for k in ("calls", "input_tokens", "output_tokens", "cache_read_tokens",
                                      "cache_write_tokens"))


def _without_our_version_noise(agent: str, data: bytes | None) -> Any:
    """Qwen Code rewrites its settings.json on start (adds ``$version``, reorders): compare the parsed
    settings without what Qwen itself adds."""
    if agent != "qwen-code" or data is None:
        return data
    from collector.deploy.jsonc import parse as parse_jsonc

    value = parse_jsonc(data.decode(), comments=True).value()
    value.pop("$version", None)
    return value


@pytest.mark.parametrize(("agent", "event"), [("claude-code", "claude_code.api_request"),
                                              ("codex", "codex.sse_event"), ("qwen-code", "qwen-code.api_response")])
def test_install_telemetry_sends_the_agents_own_otlp_to_the_daemon(
        e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer, agent: str, event: str) -> None:
    port = free_port()
    write_agent_config(agent, agent_home.home, agent_home.workdir, fake_llm)
    config = agent_home.home / CONFIG[agent]
    before = config.read_bytes() if config.exists() else None
    collector(agent_home.home, "install", "--agent", agent, "--telemetry", port=port)
    assert f"http://127.0.0.1:{port}" in config.read_text()
    token = (data_dir(agent_home) / "state" / "ingest.token").read_text().strip()
    assert token not in config.read_text()
    proc = subprocess.Popen([sys.executable, "-m", "collector", "run"], cwd=ROOT,
                            env=collector_env(agent_home.home, port), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_listening(port)
        results = run_scenario(agent, "tool_then_answer", agent_home.home, agent_home.workdir, fake_llm,
                               log_dir=agent_home.root)
        assert all(r.returncode == 0 for r in results), describe(results)
        source = f"{agent}:telemetry"
        wait_for(lambda: _live_status(agent_home, port)["sources"][source]["otel_records"] > 0, timeout=30,
                 what="the daemon reading the telemetry back from its spool")
        truth = _served_totals(fake_llm)
        wait_for(lambda: _session_totals(agent_home) == truth, timeout=30,
                 what=f"report: the server's {truth} from files and telemetry merged, each call once")
        status = _live_status(agent_home, port)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err.decode()[-3000:]
    events = _spooled_events(agent_home, agent)
    assert event in events, events
    assert status["otlp"]["records"][agent] > 0
    assert _session_totals(agent_home) == truth  # still once each after the daemon stopped
    assert status["ingest"]["requests"].get("otlp_same_user", 0) >= 1  # no token: our own user's client
    collector(agent_home.home, "uninstall", "--agent", agent, port=port)
    after = config.read_bytes() if config.exists() else None
    assert f"127.0.0.1:{port}".encode() not in (after or b"")
    assert _without_our_version_noise(agent, after) == _without_our_version_noise(agent, before)


def test_claude_codes_telemetry_still_reaches_the_users_own_backend(
        e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    """The user sent Claude Code's telemetry to a backend of theirs (a real OTLP/HTTP server here); after
    `install --telemetry` the same records reach it through the daemon, unchanged: each forwarded request
    is the spooled part of Claude Code's request, field for field."""
    from support.otlp_receiver import OtlpReceiver

    port, backend = free_port(), OtlpReceiver().start()
    try:
        write_agent_config("claude-code", agent_home.home, agent_home.workdir, fake_llm)
        settings = agent_home.home / CONFIG["claude-code"]
        data = json.loads(settings.read_text())
        data["env"] = {"CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
                       "OTEL_EXPORTER_OTLP_ENDPOINT": backend.endpoint, "OTEL_LOGS_EXPORTER": "otlp"}
        settings.write_text(json.dumps(data, indent=2))
        collector(agent_home.home, "install", "--agent", "claude-code", "--telemetry", port=port)
        proc = subprocess.Popen([sys.executable, "-m", "collector", "run"], cwd=ROOT,
                                env=collector_env(agent_home.home, port), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        try:
            wait_listening(port)
            results = run_scenario("claude-code", "tool_then_answer", agent_home.home, agent_home.workdir,
                                   fake_llm, log_dir=agent_home.root)
            assert all(r.returncode == 0 for r in results), describe(results)
            folder = data_dir(agent_home) / "spool" / "otlp" / "claude-code"

            def spooled() -> list[Any]:
                return [json.loads(line)["payload"]["export"] for f in sorted(folder.glob("*.jsonl"))
                        for line in f.read_text().splitlines() if line and json.loads(line)["event"] == "logs"]

            def forwarded() -> list[Any]:
                return [b for b in list(backend.received.json_bodies) if "resourceLogs" in b]

            wait_for(lambda: spooled() and len(forwarded()) >= len(spooled()), timeout=30,
                     what="every spooled request forwarded to the user's backend")
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err.decode()[-3000:]
        assert forwarded() == spooled()
        names = {(r.get("body") or {}).get("stringValue") for body in forwarded()
                 for res in body["resourceLogs"] for s in res["scopeLogs"] for r in s["logRecords"]}
        assert "claude_code.api_request" in names, names
    finally:
        backend.stop()
