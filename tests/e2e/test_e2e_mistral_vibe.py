"""Real Mistral Vibe 3.0.2 (PyPI ``mistral-vibe``, installed by pip_agents.py) against the fake Chat
Completions server, headless (``vibe -p ... --output streaming --auto-approve``) in a throwaway HOME, then the
real ``agent-collector collect --once``: the entries from Vibe's session store; our hooks (``install``) give the
live status in the first scenario, the others run without them. Every
model call's tokens are checked against the usage the server sent, with the tool calls and their outcome.

Offline setup (``~/.vibe/config.toml``): a ``mistral``-backend provider at the fake server, and every
phone-home off: ``vibe_base_url``/``console_base_url`` point at the fake server (Vibe fetches a managed
config from there at every start; the 404 it gets is ignored), telemetry, update checks, experiments,
the model catalog, registry skills, connectors, notifications and OpenTelemetry disabled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLMServer
from pip_agents import ensure_pip_agent
from support import ROOT, entry_tokens, make_paths, tool_pairs, truth_from_lines
from support.collect_once import collect_clean

pytestmark = pytest.mark.e2e
AGENT = "mistral-vibe"
CONFIG = """active_model = "fake"
enable_telemetry = false
enable_update_checks = false
enable_auto_update = false
enable_notifications = false
enable_connectors = false
experimental_enable_model_catalog = false
experimental_enable_registry_skills = false
enable_otel = false
vibe_base_url = "{url}"
console_base_url = "{url}"

[experiments]
enable = false

[[providers]]
name = "fake"
api_base = "{url}/v1"
api_key_env_var = "FAKE_VIBE_API_KEY"
backend = "mistral"

[[models]]
name = "devstral-fake"
provider = "fake"
alias = "fake"
input_price = 0.0
output_price = 0.0
max_context_length = 200000
"""


@pytest.fixture(scope="module")
def vibe() -> Path:
    return ensure_pip_agent(AGENT)


class Run:
    def __init__(self, root: Path, server: FakeLLMServer, exe: Path) -> None:
        self.home, self.work, self.server, self.exe = root / "home", root / "work", server, exe
        (self.home / ".vibe").mkdir(parents=True)
        self.work.mkdir()
        (self.home / ".vibe" / "config.toml").write_text(CONFIG.format(url=server.url))
        self.paths = make_paths(root, self.home)

    def install(self) -> None:
        """``agent-collector install --agent mistral-vibe``: our hooks in ~/.vibe/hooks.toml."""
        env = {**os.environ, "HOME": str(self.home), "AGENT_COLLECTOR_DATA_DIR": str(self.paths.data_dir),
               "AGENT_COLLECTOR_CONFIG_DIR": str(self.paths.config_dir)}
        done = subprocess.run([sys.executable, "-m", "collector", "install", "--agent", AGENT], env=env,
                              capture_output=True, timeout=120, cwd=ROOT)
        assert done.returncode == 0, done.stderr.decode(errors="replace")

    def prompt(self, text: str, *extra: str) -> None:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(self.home), "FAKE_VIBE_API_KEY": "sk-fake-e2e", "TERM": "dumb"}
        done = subprocess.run([str(self.exe), "-p", text, "--output", "streaming", "--auto-approve", *extra],
                              cwd=self.work, env=env, capture_output=True, timeout=240, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]

    def collect(self) -> list[dict[str, Any]]:
        return collect_clean(self.paths)

    def served(self) -> Counter[tuple[int, int, int, int]]:
        return truth_from_lines(self.server.responses)


def check_exact(run: Run, entries: list[dict[str, Any]], calls: int) -> None:
    served = run.served()
    assert sum(served.values()) == calls, run.server.decisions()
    assert entry_tokens(entries) == served, "every model call, with the server's exact usage"


def test_tool_then_answer(vibe: Path, fake_llm: FakeLLMServer, tmp_path: Path) -> None:
    """With our hooks installed: the entries as from the files alone, and the hooks' live status."""
    run = Run(tmp_path, fake_llm, vibe)
    run.install()
    run.prompt("Please run `echo hi` in the shell and tell me what it printed.")
    entries = run.collect()
    spooled = [json.loads(x) for f in sorted(run.paths.spool_dir.rglob("*.jsonl")) for x in f.read_text().splitlines()]
    assert [h["event"] for h in spooled] == ["pre_tool", "post_tool", "post_agent"]
    statuses = [e["session.status"] for e in sorted(entries, key=lambda e: e["time_unix_nano"])
                if e["event.name"] == "session.status"]
    assert statuses == ["running", "ready_for_review"]
    check_exact(run, entries, 2)
    names = Counter(e["event.name"] for e in entries)
    assert {k: names[k] for k in ("session.start", "user.prompt", "llm.response", "tool.call", "tool.result")} == {
        "session.start": 1, "user.prompt": 1, "llm.response": 2, "tool.call": 1, "tool.result": 1}
    ((call_id, pair),) = tool_pairs(entries).items()
    assert call_id.startswith("call_") and pair == (1, 1, "success")
    (prompt,) = [e for e in entries if e["event.name"] == "user.prompt"]
    turned = [e for e in entries if e["event.name"] in ("llm.response", "tool.call", "tool.result")]
    assert {e["gen_ai.turn.id"] for e in turned} == {prompt["gen_ai.turn.id"]}
    assert len({e["gen_ai.session.id"] for e in entries}) == 1


def test_failing_command_is_an_error(vibe: Path, fake_llm: FakeLLMServer, tmp_path: Path) -> None:
    run = Run(tmp_path, fake_llm, vibe)
    run.prompt("Please run `ls /nonexistent-e2e-dir` in the shell and tell me what it printed.")
    entries = run.collect()
    check_exact(run, entries, 2)
    (result,) = [e for e in entries if e["event.name"] == "tool.result"]
    assert result["tool.result.status"] == "error" and result["error.type"] == "exit_code"
    assert result["process.exit.code"] not in (None, 0)


def test_missing_file_is_a_tool_error(vibe: Path, fake_llm: FakeLLMServer, tmp_path: Path) -> None:
    """read_file of a missing file: Vibe's ``tool_failed`` (``error.message`` its own words)."""
    run = Run(tmp_path, fake_llm, vibe)
    run.prompt(f"Please read the file {tmp_path}/missing-e2e.txt and tell me what it says.")
    entries = run.collect()
    check_exact(run, entries, 2)
    (call,) = [e for e in entries if e["event.name"] == "tool.call"]
    (result,) = [e for e in entries if e["event.name"] == "tool.result"]
    assert call["gen_ai.tool.name"] == "read_file" and result["gen_ai.tool.call.id"] == call["gen_ai.tool.call.id"]
    assert result["tool.result.status"] == "error" and result["error.type"] == "tool_failed"
    assert result["error.message.length"] > 0  # content capture is off: its length and digest only


def test_two_turns_across_a_resume_read_live(vibe: Path, fake_llm: FakeLLMServer, tmp_path: Path) -> None:
    """``--continue`` takes the session up again in a new process, in the same folder and id. Vibe deletes
    the first turn's journal segment at a later snapshot, so the collector reads each turn as it lands."""
    run = Run(tmp_path, fake_llm, vibe)
    run.prompt("Please run `echo hi` in the shell and tell me what it printed.")
    first = run.collect()
    run.prompt("Please run `echo again` in the shell and tell me what it printed.", "--continue")
    entries = run.collect()
    check_exact(run, entries, 4)
    assert len(entries) > len(first)
    assert len({e["gen_ai.session.id"] for e in entries}) == 1
    prompts = [e for e in entries if e["event.name"] == "user.prompt"]
    assert len(prompts) == 2 and len({p["gen_ai.turn.id"] for p in prompts}) == 2
    assert all(pair == (1, 1, "success") for pair in tool_pairs(entries).values()) and len(tool_pairs(entries)) == 2
