"""`agent-collector statusline` as Claude Code runs it: the command `install` writes, started by a shell
with the status-line payload on stdin; `install` keeping (and chaining) a status line the user had, and
`uninstall` giving the file back byte for byte, or leaving a status line someone else set alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from support import FIXTURES, ROOT

PAYLOAD = (FIXTURES / "statusline" / "claude-code" / "payload.json").read_bytes()
SETTINGS = (b'{\n  "model": "opus",\n'
            b'  "statusLine": {"type": "command", "command": "echo \\"my line\\"; echo second"}\n}\n')


def agent_collector(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_COLLECTOR_", "XDG_", "CLAUDE_"))}
    env.update(HOME=str(home), AGENT_COLLECTOR_HOME=str(home))
    return subprocess.run([sys.executable, "-m", "collector", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, check=False)


def write_spend(home: Path) -> None:
    state = home / ".local" / "share" / "agent-collector" / "state"
    state.mkdir(parents=True, exist_ok=True)
    now = time.time()
    (state / "spend.json").write_text(json.dumps({
        "updated": now, "today": {"usd": 3.1}, "sessions": {},
        "block": {"start_unix": now - 600, "end_unix": now + 3 * 3600 + 90, "usd": 1.5},
        "budgets": [{"name": "daily", "level": "over", "fraction": 1.04, "hard": True}]}))


def run_setting(home: Path) -> str:
    setting = json.loads((home / ".claude" / "settings.json").read_text())["statusLine"]
    assert setting["type"] == "command" and setting["refreshInterval"] == 5
    done = subprocess.run(setting["command"], shell=True, input=PAYLOAD, capture_output=True, timeout=30,
                          env={"PATH": os.environ["PATH"], "HOME": str(home)}, check=True)
    return done.stdout.decode()


def test_install_chains_the_previous_line_and_uninstall_restores_the_bytes(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    settings = tmp_path / ".claude" / "settings.json"
    settings.write_bytes(SETTINGS)
    write_spend(tmp_path)
    done = agent_collector(tmp_path, "statusline", "install")
    assert done.returncode == 0 and "the previous one runs first" in done.stdout, done.stderr
    assert json.loads(settings.read_text())["model"] == "opus"
    want = "my line  $0.42 session | $3.10 today | block 3h01m left ($1.50) | OVER daily 104%\n"
    assert run_setting(tmp_path) == want
    again = agent_collector(tmp_path, "statusline", "install")
    assert again.stdout.endswith("already runs agent-collector statusline\n")
    done = agent_collector(tmp_path, "statusline", "uninstall")
    assert done.returncode == 0 and settings.read_bytes() == SETTINGS, done.stderr


def test_without_a_previous_line_uninstall_removes_ours_and_spares_a_later_one(tmp_path: Path) -> None:
    write_spend(tmp_path)
    assert agent_collector(tmp_path, "statusline", "install").returncode == 0
    settings = tmp_path / ".claude" / "settings.json"
    assert run_setting(tmp_path).startswith("$0.42 session | $3.10 today")
    data = json.loads(settings.read_text())
    data["theme"] = "dark"  # the user edits the file meanwhile: only our key goes
    settings.write_text(json.dumps(data))
    assert agent_collector(tmp_path, "statusline", "uninstall").returncode == 0
    assert json.loads(settings.read_text()) == {"theme": "dark"}
    settings.write_text(json.dumps({"statusLine": {"type": "command", "command": "other"}}))
    done = agent_collector(tmp_path, "statusline", "uninstall")
    assert "is not ours; left alone" in done.stdout and "other" in settings.read_text()


def test_json_output_and_a_home_with_no_daemon_yet(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    args = [sys.executable, "-m", "collector.cli.statusline_cmd", "--state-dir", str(tmp_path / "none")]
    done = subprocess.run(args, input=PAYLOAD, capture_output=True, env=env, cwd=ROOT, timeout=30, check=True)
    assert done.stdout == b"agent-collector: no data yet\n"
    write_spend(tmp_path)
    state = tmp_path / ".local" / "share" / "agent-collector" / "state"
    done = subprocess.run([*args[:-1], str(state), "--json"], input=PAYLOAD, capture_output=True, env=env, cwd=ROOT,
                          timeout=30, check=True)
    got = json.loads(done.stdout)
    assert (got["session_usd"], got["today_usd"], got["budget"], got["model"]) == (0.4213, 3.1, "OVER daily 104%",
                                                                                  "Sonnet 4.5")


def test_install_statusline_and_uninstall_with_the_agent(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    settings = tmp_path / ".claude" / "settings.json"
    settings.write_bytes(SETTINGS)
    write_spend(tmp_path)
    done = agent_collector(tmp_path, "install", "--agent", "claude-code", "--statusline")
    assert done.returncode == 0 and "claude-code: set statusLine in" in done.stdout, done.stdout + done.stderr
    assert run_setting(tmp_path).startswith("my line  $0.42 session")
    done = agent_collector(tmp_path, "uninstall", "--agent", "claude-code")
    assert done.returncode == 0 and "claude-code: restored statusLine in" in done.stdout, done.stdout + done.stderr
    assert settings.read_bytes() == SETTINGS
