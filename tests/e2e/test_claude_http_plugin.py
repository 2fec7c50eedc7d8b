"""Real Claude Code with agent-collector as a drop-in plugin: every hook runs the spool hook script (no
network, no secret in the plugin), a running daemon reads them live (status idle -> running ->
ready_for_review -> closed), the output is the settings.json path's, and with the daemon down nothing is
lost: the next collection reads the spool."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLMServer
from harness import AgentHome, describe, run_scenario, write_agent_config
from support.waits import free_port, wait_for

from collector.definitions import load_definitions
from collector.deploy import install_agent
from collector.deploy.http_plugin import write_plugin
from collector.ingest.secret import read_token
from collector.paths import Paths, resolve_paths
from collector.state.checkpoints import CHECKPOINTS_FILE, read_saved

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
SPEC = {"kind": "http_plugin_dir", "dir": "${CLAUDE_CONFIG_DIR:-~/.claude}/skills/agent-collector"}


def collector_env(home: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_COLLECTOR_")}
    # These tests place the plugin by hand (write_plugin) and must keep it as placed: no auto-deploy, whose
    # records would let the watchdog put its own version back.
    env.update(AGENT_COLLECTOR_HOME=str(home), AGENT_COLLECTOR_INGEST__PORT=str(port),
               AGENT_COLLECTOR_DEPLOY__AUTO="false")
    return env


def collector(home: Path, port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "collector", *args], cwd=ROOT, env=collector_env(home, port),
                          capture_output=True, text=True, timeout=120, check=False)


def output(paths: Paths) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(paths.output_dir.glob("activity-*.jsonl"))
            for line in f.read_text().splitlines() if line.strip()]


def statuses(entries: list[dict[str, Any]]) -> list[str]:
    changes = [e for e in entries if e["event.name"] == "session.status"]
    return [e["session.status"] for e in sorted(changes, key=lambda e: e["time_unix_nano"])]


def shape(entries: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    """What an entry says, without what differs between two runs (ids, times, paths, token counts)."""
    keys = ("gen_ai.tool.name", "tool.result.status", "session.status", "agent.hook_event_name",
            "source.kind")
    return Counter((e["event.name"], *(e.get(k) for k in keys)) for e in entries)


def run_claude(env: AgentHome, server: FakeLLMServer) -> None:
    write_agent_config("claude-code", env.home, env.workdir, server)
    results = run_scenario("claude-code", "tool_then_answer", env.home, env.workdir, server, log_dir=env.root)
    assert [r.returncode for r in results] == [0], describe(results)


def settings_json_path(tmp: Path, server: FakeLLMServer) -> list[dict[str, Any]]:
    home = tmp / "home"
    home.mkdir(parents=True)
    from harness import init_workdir

    env = AgentHome(tmp, home, init_workdir(tmp / "work", git=True))
    paths = resolve_paths(home, env={})
    paths.agents_override_dir.mkdir(parents=True)  # the user's choice: hooks in settings.json
    override = '{"id": "claude-code", "integration_variant": "settings"}'
    (paths.agents_override_dir / "claude-code.json").write_text(override)
    defn = load_definitions(paths.agents_override_dir).agents["claude-code"]
    assert [i["kind"] for i in defn.integrations] == ["settings_hooks"]
    assert not [c for c in install_agent(defn, paths) if c.failed]
    run_claude(env, server)
    result = collector(home, free_port(), "collect", "--once")
    assert result.returncode == 0, result.stderr
    return output(paths)


@pytest.fixture
def plugin_home(e2e_agents_bin: Path, agent_home: AgentHome) -> tuple[AgentHome, Paths, int]:
    """A throwaway home with the drop-in plugin (and the pinned agents installed)."""
    port = free_port()
    paths = resolve_paths(agent_home.home, env={})
    write_plugin("claude-code", SPEC, paths, port=port)
    return agent_home, paths, port


PluginHome = tuple[AgentHome, Paths, int]


def test_drop_in_plugin_with_a_running_daemon(plugin_home: PluginHome, fake_llm: FakeLLMServer,
                                              tmp_path: Path) -> None:
    env, paths, port = plugin_home
    daemon = subprocess.Popen([sys.executable, "-m", "collector", "run"], cwd=ROOT,
                              env=collector_env(env.home, port), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: _reachable(port), 20, interval=0.1)
        run_claude(env, fake_llm)
        wait_for(lambda: "closed" in statuses(output(paths)), 20, interval=0.1)
        # the tokens come from the transcript, which a later cycle than the SessionEnd hook may read
        wait_for(lambda: any(row["input_tokens_today"] > 0 for row in get_sessions(port, read_token(paths))), 20,
                 interval=0.1)
        sessions = get_sessions(port, read_token(paths))
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=20)
    assert daemon.returncode == 0, err

    # every hook event went to the spool through the hook script, in order; none over http
    events = [line["event"] for line in script_spool(paths)]
    assert events[0] == "SessionStart" and events[-1] == "SessionEnd"
    assert {"UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"} <= set(events)
    assert not [f for f in (paths.spool_dir / "claude-code").glob("*.http.jsonl") if f.read_text().strip()]

    entries = output(paths)
    assert statuses(entries) == ["idle", "running", "ready_for_review", "closed"]
    (row,) = sessions
    assert row["status"] == "closed" and row["tool_calls_today"] == 1 and row["input_tokens_today"] > 0

    # the same entries as with hooks in settings.json
    reference = settings_json_path(tmp_path / "settings", fake_llm)
    assert shape(entries) == shape(reference)


def test_drop_in_plugin_with_the_daemon_down(plugin_home: PluginHome, fake_llm: FakeLLMServer,
                                             tmp_path: Path) -> None:
    env, paths, port = plugin_home
    run_claude(env, fake_llm)  # no daemon: the hooks spool all the same
    events = [line["event"] for line in script_spool(paths)]
    assert events[0] == "SessionStart" and events[-1] == "SessionEnd"
    result = collector(env.home, port, "collect", "--once")
    assert result.returncode == 0, result.stderr
    # nothing was lost: the same entries as with hooks in settings.json
    assert shape(output(paths)) == shape(settings_json_path(tmp_path / "settings", fake_llm))


def script_spool(paths: Paths) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted((paths.spool_dir / "claude-code").glob("*.jsonl"))
            if ".http." not in f.name for line in f.read_text().splitlines() if line.strip()]


def get_sessions(port: int, token: str | None) -> list[dict[str, Any]]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/sessions",
                                     headers={"X-Agent-Collector-Token": token or ""})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=5) as response:
        return list(json.loads(response.read())["sessions"])


def ingest_stats(port: int, token: str | None) -> dict[str, Any]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/status",
                                     headers={"X-Agent-Collector-Token": token or ""})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=5) as response:
        return dict(json.loads(response.read())["ingest"])


def test_two_homes_two_daemons_real_claude_each_gets_only_its_own(
        e2e_agents_bin: Path, tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    """Home A and home B on one machine, each with its daemon (own port, own secret). Claude Code in B
    reaches only B's daemon (its hooks spool under B's home: no port is involved); A's daemon holds
    nothing of B and refuses a request without A's secret."""
    from harness import init_workdir

    homes = []
    for name in ("a", "b"):
        home = tmp_path / name / "home"
        home.mkdir(parents=True)
        env = AgentHome(tmp_path / name, home, init_workdir(tmp_path / name / "work", git=True))
        paths = resolve_paths(home, env={})
        port = free_port()
        write_plugin("claude-code", SPEC, paths, port=port)
        homes.append((env, paths, port))
    (a_env, a_paths, a_port), (b_env, b_paths, b_port) = homes
    assert read_token(a_paths) != read_token(b_paths)
    daemons = [subprocess.Popen([sys.executable, "-m", "collector", "run"], cwd=ROOT, env=collector_env(e.home, p),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
               for e, _, p in homes]
    try:
        wait_for(lambda: _reachable(a_port) and _reachable(b_port), 20, interval=0.1)
        run_claude(b_env, fake_llm)
        wait_for(lambda: "closed" in statuses(output(b_paths)), 20, interval=0.1)
        b_sessions = {e["gen_ai.session.id"] for e in output(b_paths) if e.get("gen_ai.session.id")}
        assert len(b_sessions) == 1
        assert [s["session_id"] for s in get_sessions(b_port, read_token(b_paths))] == list(b_sessions)
        assert get_sessions(a_port, read_token(a_paths)) == [] and output(a_paths) == []

        assert ingest_stats(a_port, read_token(a_paths))["requests"].get("accepted", 0) == 0
        with pytest.raises(urllib.error.HTTPError) as refused:
            get_sessions(a_port, None)
        assert refused.value.code == 401
    finally:
        for daemon in daemons:
            daemon.send_signal(signal.SIGTERM)
        for daemon in daemons:
            _, err = daemon.communicate(timeout=20)
            assert daemon.returncode == 0, err
    assert script_spool(b_paths), "B's hooks spooled at B's home"
    assert not script_spool(a_paths), "and nothing of B's at A's"


def _reachable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def test_watchdog_restores_a_deleted_plugin_and_the_next_session_uses_it(
        e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    """Another program deletes the whole plugin directory under a running daemon: both files are back
    within 5 s, and the next Claude Code session's hooks arrive through the restored plugin."""
    import shutil

    env, port = agent_home, free_port()
    paths = resolve_paths(env.home, env={})
    installed = collector(env.home, port, "install", "--agent", "claude-code")
    assert installed.returncode == 0, installed.stderr
    root = paths.expand(SPEC["dir"])
    manifest, hooks = root / ".claude-plugin" / "plugin.json", root / "hooks" / "hooks.json"
    originals = manifest.read_bytes(), hooks.read_bytes()
    daemon = subprocess.Popen([sys.executable, "-m", "collector", "run"], cwd=ROOT,
                              env=collector_env(env.home, port), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: _reachable(port) and read_saved(paths.state_dir / CHECKPOINTS_FILE, ["watchdog"]), 20,
                 interval=0.1)
        shutil.rmtree(root)
        started = time.monotonic()
        wait_for(lambda: manifest.exists() and hooks.exists(), timeout=5)
        assert time.monotonic() - started < 5
        wait_for(lambda: (manifest.read_bytes(), hooks.read_bytes()) == originals, timeout=2)
        run_claude(env, fake_llm)
        wait_for(lambda: "closed" in statuses(output(paths)), 20, interval=0.1)
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=20)
    assert daemon.returncode == 0, err
    assert "put back" in err
    events = {line["event"] for line in script_spool(paths)}
    assert {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"} <= events
    assert statuses(output(paths)) == ["idle", "running", "ready_for_review", "closed"]
