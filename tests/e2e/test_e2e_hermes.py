"""Real Hermes Agent 0.19.0 (PyPI ``hermes-agent``, installed by pip_agents.py) against the fake Chat
Completions server, headless (``hermes chat -q ... -Q --yolo``) in a throwaway HOME, then the real
``agent-collector collect --once``: read from ``~/.hermes/state.db`` and ``logs/agent.log`` alone (nothing is
deployed). Every model call's tokens are checked against the usage the server sent, with the tool calls and
their outcome, and a resumed turn (``--continue``: the same session row, its totals raised) yields only
its new calls.

Offline setup (``~/.hermes/config.yaml``, JSON being YAML): a ``custom`` provider at the fake server with a
``context_length`` (so no endpoint probing beyond one models request the server answers), lazy installs,
the pre-exec scanner, the model catalog, language servers and the skill curator off; a fresh
``.update_check`` so the start-up update check (PyPI's JSON API, no off switch) is not made.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLMServer
from pip_agents import ensure_pip_agent
from support import entry_tokens, make_paths, tool_pairs, truth_from_lines
from support.collect_once import collect_clean

pytestmark = pytest.mark.e2e
AGENT = "hermes"


@pytest.fixture(scope="module")
def hermes() -> Path:
    return ensure_pip_agent(AGENT)


class Run:
    def __init__(self, root: Path, server: FakeLLMServer, exe: Path) -> None:
        self.home, self.work, self.server, self.exe = root / "home", root / "work", server, exe
        state = self.home / ".hermes"
        state.mkdir(parents=True)
        self.work.mkdir()
        config = {"model": {"provider": "custom", "default": "fake-model", "base_url": f"{server.url}/v1",
                            "api_key": "sk-fake-e2e", "context_length": 200000},
                  "security": {"allow_lazy_installs": False, "tirith_enabled": False},
                  "model_catalog": {"enabled": False}, "lsp": {"enabled": False}, "curator": {"enabled": False}}
        (state / "config.yaml").write_text(json.dumps(config))
        (state / ".update_check").write_text(json.dumps({"ts": time.time(), "behind": 0, "rev": None,
                                                         "ver": "0.19.0"}))
        self.paths = make_paths(root, self.home)

    def prompt(self, text: str, *extra: str) -> None:
        env = {"PATH": f"{self.exe.parent}:/usr/bin:/bin", "HOME": str(self.home), "TERM": "dumb",
               "HERMES_DISABLE_LAZY_INSTALLS": "1"}
        done = subprocess.run([str(self.exe), "chat", "-q", text, "-Q", "--yolo", *extra], cwd=self.work, env=env,
                              capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]

    def collect(self) -> list[dict[str, Any]]:
        return collect_clean(self.paths)

    def served(self) -> Counter[tuple[int, int, int, int]]:
        return truth_from_lines(self.server.responses)


def test_tool_then_answer_then_a_resumed_turn(hermes: Path, fake_llm: FakeLLMServer, tmp_path: Path) -> None:
    run = Run(tmp_path, fake_llm, hermes)
    run.prompt("Please run `echo hi` in the shell and tell me what it printed.")
    first = run.collect()
    assert entry_tokens(first) == run.served() and sum(run.served().values()) == 2, run.server.decisions()
    names = Counter(e["event.name"] for e in first)
    assert {k: names[k] for k in ("session.start", "user.prompt", "llm.response", "tool.call", "tool.result")} == {
        "session.start": 1, "user.prompt": 1, "llm.response": 2, "tool.call": 1, "tool.result": 1}
    ((call_id, pair),) = tool_pairs(first).items()
    assert call_id.startswith("call_") and pair == (1, 1, "success")

    run.prompt("Please run `ls /nonexistent-e2e-dir` in the shell and tell me what it printed.", "--continue")
    entries = run.collect()
    served = run.served()
    assert sum(served.values()) == 4 and entry_tokens(entries) == served, "each call once, with the server's usage"
    assert len({e["gen_ai.session.id"] for e in entries}) == 1, "a resumed turn is the same session"
    prompts = [e for e in entries if e["event.name"] == "user.prompt"]
    assert len({p["gen_ai.turn.id"] for p in prompts}) == 2
    failed = [e for e in entries if e["event.name"] == "tool.result" and e["tool.result.status"] == "error"]
    assert [(e["error.type"], e["process.exit.code"] not in (None, 0)) for e in failed] == [("exit_code", True)]
    turned = [e for e in entries if e["event.name"] in ("llm.response", "tool.call", "tool.result")]
    assert {e["gen_ai.turn.id"] for e in turned} == {p["gen_ai.turn.id"] for p in prompts}
