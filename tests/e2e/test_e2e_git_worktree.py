"""Real Qwen Code 0.24.4 (from npm) run twice inside a linked worktree (`git worktree add`) of a real
repository with an scp-style remote, on two branches (the second run after `git switch -c` in the same
worktree), against the fake Chat Completions server, with the collector installed by `agent-collector
install`: every model call's entry carries the repository, branch and worktree, and `agent-collector report
--by branch` splits the tokens between the two branches exactly as the server sent them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from collector_e2e import collector, run_collected
from fake_llm import FakeLLMServer
from harness import AgentHome
from support import entry_tokens, truth_from_lines, usage_tuple
from support.git_repos import git

pytestmark = pytest.mark.e2e
AGENT = "qwen-code"
URL = "https://github.com/acme/shop"


def _served(responses: list[dict[str, Any]]) -> tuple[int, int, int, int, int]:
    """(calls, input, output, cache read, cache write) of the server's replies, as `report` counts them."""
    parts = [usage_tuple(r["api"], r["usage"]) for r in responses if r.get("kind") == "response_usage"]
    inp, out, cache_read, cache_write = (sum(p[i] for p in parts) for i in range(4))
    return len(parts), inp, out, cache_read, cache_write


def _report(env: AgentHome, kind: str) -> dict[str, tuple[int, int, int, int, int]]:
    data = json.loads(collector(env.home, "report", "--by", kind, "--json", "--timezone", "UTC").stdout)
    return {r["key"]: (r["calls"], r["input_tokens"], r["output_tokens"], r["cache_read_tokens"],
                       r["cache_write_tokens"]) for r in data["rows"]}


def test_two_branches_of_a_linked_worktree(e2e_agents_bin: Path, agent_home: AgentHome,
                                           fake_llm: FakeLLMServer) -> None:
    git(agent_home.workdir, "remote", "add", "origin", "git@github.com:acme/shop.git")
    worktree = agent_home.root / "shop-feature"
    git(agent_home.workdir, "worktree", "add", "-q", "-b", "feature-a", str(worktree))
    env = AgentHome(root=agent_home.root, home=agent_home.home, workdir=worktree)

    run_collected(AGENT, env, fake_llm, "tool_then_answer")
    first = list(fake_llm.responses)
    git(worktree, "switch", "-q", "-c", "feature-b")
    entries = run_collected(AGENT, env, fake_llm, "tool_then_answer")
    second = fake_llm.responses[len(first):]
    assert first and second, "the server answered both runs"

    calls = [e for e in entries if e["event.name"] == "llm.response"]
    assert len({e["gen_ai.session.id"] for e in calls}) == 2
    for entry in calls:
        assert entry["vcs.repository.name"] == "shop" and entry["vcs.repository.url.full"] == URL
        assert os.path.realpath(entry["git.worktree.path"]) == os.path.realpath(worktree)
        assert entry["git.worktree.linked"] is True
    branches = {e["gen_ai.session.id"]: {c["vcs.ref.head.name"] for c in calls
                                         if c["gen_ai.session.id"] == e["gen_ai.session.id"]} for e in calls}
    assert sorted(map(sorted, branches.values())) == [["feature-a"], ["feature-b"]], "one branch per run"
    assert entry_tokens(entries) == truth_from_lines(fake_llm.responses), "every call, with the server's numbers"

    assert _report(env, "branch") == {"feature-a": _served(first), "feature-b": _served(second)}
    assert _report(env, "repo") == {URL: _served(fake_llm.responses)}
    assert list(_report(env, "worktree").values()) == [_served(fake_llm.responses)]
