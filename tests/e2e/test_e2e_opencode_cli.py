"""The ``command`` source with the real OpenCode 1.18.33 CLI: sessions made by real `opencode run`s against
the fake model server, read once through OpenCode's SQLite store and once through `opencode session list`
+ `opencode export <id>` (the example definition of docs/examples/agents.d/opencode.json), by two
collectors with their own data directories. Both must find the same turns and tokens, with the same event
ids (so the two ways dedupe when one collector runs both); a second poll reads nothing new, and a further
`opencode run --continue` turn is read without repeating the first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from collector_e2e import collector_env
from fake_llm import FakeLLMServer
from harness import AgentHome, Scenario, Turn, run_scenario, write_agent_config
from support import ROOT, assert_no_duplicates, assert_schema_valid, entry_tokens, read_output, truth_from_lines

pytestmark = pytest.mark.e2e
EXAMPLE = ROOT / "docs" / "examples" / "agents.d" / "opencode.json"
NAMES = ("session.start", "user.prompt", "llm.response", "tool.call", "tool.result")
NO_NPM_RETRY = {"npm_config_fetch_retries": "0"}


def definition(workdir: Path, sources: tuple[str, ...]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EXAMPLE.read_text())
    data["sources"] = [s for s in data["sources"] if s["kind"] in sources]
    for spec in data["sources"]:
        if spec["kind"] == "command":
            spec["cwd"] = str(workdir)
    return data


class Collector:
    """One collector with its own config and data directories, over the agents' shared HOME."""

    def __init__(self, env: AgentHome, name: str, bin_dir: Path, sources: tuple[str, ...]) -> None:
        self.root = env.root / name
        self.home = env.home
        self.bin_dir = bin_dir
        overrides = self.root / "config" / "agents.d"
        overrides.mkdir(parents=True)
        (overrides / "opencode.json").write_text(json.dumps(definition(env.workdir, sources)))

    def collect(self) -> subprocess.CompletedProcess[str]:
        env = collector_env(self.home)
        env.update(AGENT_COLLECTOR_DATA_DIR=str(self.root / "data"),
                   AGENT_COLLECTOR_CONFIG_DIR=str(self.root / "config"),
                   PATH=os.pathsep.join([str(self.bin_dir), env.get("PATH", "/usr/bin:/bin")]))
        result = subprocess.run([sys.executable, "-m", "collector", "collect", "--once", "-q"], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=180, check=False)
        assert result.returncode == 0, result.stderr
        return result

    def entries(self) -> list[dict[str, Any]]:
        return [e for e in read_output(self.root / "data" / "output") if e["event.name"] in NAMES]

    def source_status(self, name: str) -> dict[str, Any]:
        status = json.loads((self.root / "data" / "state" / "status.json").read_text())
        return dict(status["sources"][name])


def facts(entries: list[dict[str, Any]]) -> dict[str, tuple[str, Any, Any, Any, Any]]:
    """event id -> (name, turn, tokens): what both ways must agree on."""
    return {e["event.id"]: (e["event.name"], e.get("gen_ai.turn.id"), e.get("gen_ai.usage.input_tokens"),
                            e.get("gen_ai.usage.output_tokens"), e.get("gen_ai.usage.cache_read.input_tokens"))
            for e in entries}


def test_cli_polling_equals_the_database(e2e_agents_bin: Path, agent_home: AgentHome,
                                         fake_llm: FakeLLMServer) -> None:
    write_agent_config("opencode", agent_home.home, agent_home.workdir, fake_llm)
    results = run_scenario("opencode", "two_turns_resume", agent_home.home, agent_home.workdir, fake_llm,
                           extra_env=NO_NPM_RETRY)
    assert all(r.returncode == 0 for r in results)
    db = Collector(agent_home, "db", e2e_agents_bin, ("sqlite",))
    cli = Collector(agent_home, "cli", e2e_agents_bin, ("command",))
    both = Collector(agent_home, "both", e2e_agents_bin, ("sqlite", "command"))
    for c in (db, cli, both):
        c.collect()

    by_db, by_cli = db.entries(), cli.entries()
    assert_schema_valid(by_cli)
    assert facts(by_cli) == facts(by_db)  # same ids, turns and tokens
    prompts = [e for e in by_cli if e["event.name"] == "user.prompt"]
    assert len({p["gen_ai.turn.id"] for p in prompts}) == 2
    served, seen = truth_from_lines(fake_llm.responses), entry_tokens(by_cli)
    assert sum((served - seen).values()) == 1  # the title call, whose usage OpenCode keeps nowhere
    assert not seen - served
    assert {e["source.kind"] for e in by_cli} == {"export"}
    assert_no_duplicates(both.entries())
    assert facts(both.entries()) == facts(by_db)  # the two ways of one collector dedupe

    status = cli.source_status("opencode:cli")
    assert status["runs"] == 2 and status["last_exit_code"] == 0 and status["breaker"] == "closed"
    assert status["last_records"] == 1 and status["errors"] == 0  # one session: one list, one export

    cli.collect()  # nothing new: the cursor skips the session, only the list runs
    assert facts(cli.entries()) == facts(by_db)
    status = cli.source_status("opencode:cli")
    assert status["runs"] == 1 and status["last_records"] == 0

    more = Scenario("third", (Turn("Please run `echo hi` in the shell and tell me what it printed.", resume=True),))
    assert all(r.returncode == 0 for r in run_scenario("opencode", more, agent_home.home, agent_home.workdir,
                                                       fake_llm, extra_env=NO_NPM_RETRY))
    cli.collect()
    db.collect()
    assert_no_duplicates(cli.entries())
    assert facts(cli.entries()) == facts(db.entries())
    assert len({e["gen_ai.turn.id"] for e in cli.entries() if e["event.name"] == "user.prompt"}) == 3
    assert cli.source_status("opencode:cli")["last_records"] == 1  # the session, exported again
