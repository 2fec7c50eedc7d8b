"""Budgets with the real Claude Code 2.1.332 against the fake Anthropic server: `agent-collector install`,
the daemon up (as a service would be), a config.toml with a hard daily limit the first prompt's model
calls go past (priced by [prices]) and a soft one they reach the warning share of. The first run
crosses both: the daemon writes budget.threshold entries (over, warn), the mark in status and the
refusal file; the next prompt is refused by the real CLI through its UserPromptSubmit hook (exit
2, the reason shown, no model call); the status line says OVER; with the daemon stopped the next prompt
runs again (fail-open)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from collector_e2e import collector, collector_env, collector_status, data_dir
from fake_llm import FakeLLMServer
from harness import CLAUDE_MODEL, AgentHome, run_agent, write_agent_config
from support import ROOT, read_output
from support.waits import free_port, wait_for, wait_listening

pytestmark = pytest.mark.e2e
AGENT = "claude-code"
CONFIG = f"""
[prices."{CLAUDE_MODEL}"]
input = 1000.0
output = 1000.0

[budget]
notify = false

[[budget.limits]]
name = "e2e-daily"
usd = 0.01
hard = true

[[budget.limits]]
name = "e2e-soft"
usd = 1000000
warn_at = 0.000001
"""


def test_a_hard_daily_limit_refuses_the_next_prompt_until_the_daemon_stops(
        e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer) -> None:
    home, work, port = agent_home.home, agent_home.workdir, free_port()
    write_agent_config(AGENT, home, work, fake_llm)
    (home / ".config" / "agent-collector").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "agent-collector" / "config.toml").write_text(CONFIG)
    collector(home, "install", "--agent", AGENT, port=port)
    refusal = data_dir(agent_home) / "spool" / ".refuse" / f"{AGENT}.UserPromptSubmit"
    daemon = subprocess.Popen([sys.executable, "-m", "collector", "run"], cwd=ROOT, env=collector_env(home, port),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_listening(port)
        first = run_agent(AGENT, home, work, fake_llm, "Say hello.")
        assert first.returncode == 0, first.stderr[-2000:]
        wait_for(refusal.exists, timeout=60, what="the daemon's refusal file after the first run")
        calls = len(fake_llm.responses)
        refused = run_agent(AGENT, home, work, fake_llm, "Say hello again.", resume=True)
        said = refused.stdout + refused.stderr
        assert "UserPromptSubmit operation blocked by hook" in said, said[-2000:]
        assert "agent-collector: budget 'e2e-daily' (day) reached" in said, said[-2000:]
        assert len(fake_llm.responses) == calls, "the refused prompt reached no model"
        line = subprocess.run(collector_statusline(home), shell=True, capture_output=True, text=True, timeout=30,
                              input=json.dumps({"session_id": "x", "cost": {"total_cost_usd": 0.5}}), check=True)
        assert line.stdout.startswith("$0.50 session | $") and "| OVER e2e-daily " in line.stdout, line.stdout
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=30)
    assert daemon.returncode == 0, err.decode()[-3000:]
    assert not refusal.exists(), "a stopped daemon refuses nothing"
    again = run_agent(AGENT, home, work, fake_llm, "Say hello once more.", resume=True)
    assert again.returncode == 0 and len(fake_llm.responses) > calls, again.stderr[-2000:]
    made = [e for e in read_output(data_dir(agent_home) / "output") if e["event.name"] == "budget.threshold"]
    assert sorted((e["budget.name"], e["budget.level"], e["budget.hard"]) for e in made) == [
        ("e2e-daily", "over", True), ("e2e-soft", "warn", False)]
    assert all(e["budget.spent"] > 0.01 for e in made)
    crossed = collector_status(agent_home)["budget"]["crossed"]
    assert sorted(c["name"] for c in crossed) == ["e2e-daily", "e2e-soft"]


def collector_statusline(home: Path) -> str:
    """The command `statusline install` writes, installed into the throwaway home's Claude settings."""
    collector(home, "statusline", "install")
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    return settings["statusLine"]["command"]
