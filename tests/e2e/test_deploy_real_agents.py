"""The integrations `agent-collector install` deploys, run by the real agent CLIs (Codex CLI, Gemini CLI,
Qwen Code, OpenCode, Kilo Code,
GitHub Copilot CLI from npm) against the fake model server: the agent accepts its config, our hook
script or plugin really runs and spools one valid envelope per event, nothing of ours reaches the
agent's output, and `uninstall` takes it all out again. (Claude Code: test_e2e_claude_code.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLMServer
from harness import AgentHome, describe, run_scenario, write_agent_config

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]

# Events each agent fired in the captured runs of this scenario (real-agents.md), a subset we require.
EXPECTED = {
    "codex": {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "notify"},
    "gemini-cli": {"SessionStart", "BeforeAgent", "BeforeModel", "AfterModel", "BeforeTool", "AfterTool",
                   "AfterAgent", "SessionEnd"},
    "qwen-code": {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"},
    "opencode": {"chat.message", "tool.execute.before", "tool.execute.after", "session.idle",
                 "message.updated", "message.part.updated"},
    "copilot": {"sessionStart", "userPromptSubmitted", "preToolUse", "postToolUse", "agentStop", "sessionEnd"},
    "kilo-code": {"chat.message", "tool.execute.before", "tool.execute.after", "session.idle",
                  "message.updated", "message.part.updated", "plugin.dispose"},
}
CONFIG_FILES = {
    "codex": [".codex/hooks.json", ".codex/config.toml"],
    "gemini-cli": [".gemini/settings.json"],
    "qwen-code": [".qwen/settings.json"],
    "opencode": [".config/opencode/opencode.json", ".config/opencode/plugin/agent-collector.js"],
    "copilot": [".copilot/settings.json"],
    "kilo-code": [".config/kilo/kilo.jsonc", ".config/kilo/plugin/agent-collector.js"],
}


def is_epoch_seconds(value: object) -> bool:
    """A plugin's `ts` is `Date.now() / 1000`: JSON writes it without a fraction once in 1000 ms."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 1e9 < value < 1e10


def collector(home: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AGENT_COLLECTOR_", "XDG_", "CODEX_HOME", "CLAUDE_CONFIG_DIR"))}
    env.update({"HOME": str(home), "AGENT_COLLECTOR_HOME": str(home)})
    result = subprocess.run([sys.executable, "-m", "collector", *args], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, f"agent-collector {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def spool_lines(home: Path, agent: str) -> list[dict[str, Any]]:
    folder = home / ".local" / "share" / "agent-collector" / "spool" / agent
    lines = []
    for path in sorted(folder.glob(f"{agent}-*.jsonl")):
        lines += [json.loads(raw) for raw in path.read_bytes().splitlines()]  # every line must parse
    return lines


def read(home: Path, rel: str) -> bytes | None:
    path = home / rel
    return path.read_bytes() if path.exists() else None


@pytest.mark.parametrize("agent", sorted(EXPECTED))
def test_real_agent_runs_our_integration(
    agent: str, e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer
) -> None:
    home = agent_home.home
    write_agent_config(agent, home, agent_home.workdir, fake_llm)
    before = {rel: read(home, rel) for rel in CONFIG_FILES[agent]}
    out = collector(home, "install", "--agent", agent)
    assert f"{agent}: " in out and "error" not in out
    results = run_scenario(agent, "tool_then_answer", home, agent_home.workdir, fake_llm,
                           log_dir=agent_home.root, extra_env={"npm_config_fetch_retries": "0"})
    assert all(r.returncode == 0 for r in results), describe(results)
    assert "agent-collector" not in results[0].stdout  # the hook printed nothing into the agent's stream

    lines = spool_lines(home, agent)
    events = {line["event"] for line in lines}
    assert EXPECTED[agent] <= events, f"missing {EXPECTED[agent] - events}; got {sorted(events)}"
    assert all(line["agent"] == agent and is_epoch_seconds(line["ts"]) for line in lines)
    assert all(isinstance(line["payload"], dict) for line in lines), "every payload arrived as JSON"
    assert "payload_raw" not in json.dumps(lines)
    if agent == "codex":
        [note] = [line for line in lines if line["event"] == "notify"]  # argv mode
        assert note["payload"]["type"] == "agent-turn-complete"
    if agent not in ("opencode", "kilo-code"):  # plugin lines: bus events name the session elsewhere
        key = "sessionId" if agent == "copilot" else "session_id"  # Copilot's payloads are camelCase
        sessions = {line["payload"].get(key) for line in lines if line["event"] != "notify"}
        assert len(sessions) == 1 and None not in sessions

    collector(home, "uninstall", "--agent", agent)
    after = {rel: read(home, rel) for rel in CONFIG_FILES[agent]}
    for rel, content in after.items():
        if content == before[rel]:
            continue  # byte-identical (Codex, Gemini CLI, OpenCode in the runs so far)
        # the agent rewrote the file while it ran (Qwen Code adds "$version": 4 on its first start): then
        # our entries must be gone and theirs kept
        assert agent == "qwen-code", f"{rel} differs after uninstall"
        assert content is not None and b'"$version"' in content, rel
        assert content is not None and b"agent-collector" not in content, rel
