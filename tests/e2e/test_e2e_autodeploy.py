"""An agent installed after agent-collector is picked up by the running daemon: real Claude Code 2.1.332
(from npm) gets its config folder (~/.claude/settings.json, as the harness writes it for every Claude run)
while `agent-collector run` is up with nothing deployed; the daemon's auto-deploy detects it and deploys
its default integration (the drop-in plugin posting to the daemon) within the test's bound (well under
the 5 minutes asked for: the rescan interval is set to 2 s, file events come first anyway), and the next
Claude session is collected with live status from its hooks."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from collector_e2e import collector, collector_env, data_dir, statuses_of
from fake_llm import FakeLLMServer
from harness import AgentHome, describe, run_scenario, write_agent_config
from support import ROOT, read_output
from support.waits import free_port, wait_for, wait_listening

pytestmark = pytest.mark.e2e
AGENT = "claude-code"
BOUND_S = 60.0


def test_claude_installed_while_the_daemon_runs_is_deployed_and_collected_live(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    home, port = agent_home.home, free_port()
    env = {**collector_env(home, port), "AGENT_COLLECTOR_DEPLOY__RESCAN_S": "2"}
    plugin = home / ".claude" / "skills" / "agent-collector" / ".claude-plugin" / "plugin.json"
    log_path = agent_home.root / "daemon.log"
    with log_path.open("wb") as log:
        daemon = subprocess.Popen([sys.executable, "-m", "collector", "run", "--deploy"], cwd=ROOT, env=env,
                                  stdout=subprocess.DEVNULL, stderr=log)
        try:
            wait_listening(port)
            assert not (home / ".claude").exists() and not plugin.exists()
            write_agent_config(AGENT, home, agent_home.workdir, fake_llm)  # Claude Code is installed now
            appeared = time.monotonic()
            wait_for(plugin.exists, BOUND_S, "the deployed plugin", interval=0.1)
            took = time.monotonic() - appeared
            results = run_scenario(AGENT, "tool_then_answer", home, agent_home.workdir, fake_llm,
                                   log_dir=agent_home.root)
            assert all(r.returncode == 0 for r in results), describe(results)

            def live() -> list[dict[str, object]]:
                out = collector(home, "sessions", "--json", "--all", port=port).stdout
                return [s for s in json.loads(out)["sessions"] if s.get("agent") == AGENT]

            wait_for(lambda: any(s.get("status") in ("ready_for_review", "closed") for s in live()), 30,
                     "a reviewed session", interval=0.1)
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
    err = log_path.read_text(errors="replace")
    assert daemon.returncode == 0, err[-3000:]
    assert "auto-deploy: claude-code newly detected; integration deployed" in err
    print(f"deployed {took:.1f}s after ~/.claude appeared")
    status = json.loads(collector(home, "status", "--json", port=port).stdout)
    assert [d["agent"] for d in status["autodeploy"]["deployed"]] == [AGENT]
    assert status["agents"][AGENT]["integration"] == "http_plugin_dir: in place"
    collector(home, "collect", "--once", "-q", port=port)
    entries = read_output(data_dir(agent_home) / "output")
    posted = [e for e in entries if e.get("agent.hook_event_name") in ("PostToolUse", "PostToolUseFailure")]
    assert posted, "the deployed plugin's hooks reached the daemon"
    assert statuses_of(entries) == ["idle", "running", "ready_for_review", "closed"]
