"""A separately installed package adds an agent's parser and an exporter through entry points, with no
change to the collector: the real `agent-collector collect --once` finds both (importlib.metadata)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from support import read_output

from collector.paths import resolve_paths

ADDON = '''
import json
from collector.model.entry import AgentActivityEntry, event_id
from collector.registry import Plugin


def parse(record):
    line = record.data
    return [AgentActivityEntry(
        name="llm.response", agent=record.agent, time_ns=int(line["ts"] * 1e9), observed_ns=record.observed_ns,
        id=event_id(record.agent, line["session"], line["id"]), session_id=line["session"],
        attributes={"gen_ai.usage.input_tokens": line["in"], "gen_ai.usage.output_tokens": line["out"],
                    "gen_ai.request.model": "acme-1"})]


class CountingExporter:
    name = "acme-count"

    def __init__(self, path):
        self.path = path
        self.seen = 0

    def export(self, batch):
        self.seen += len(batch)

    def shutdown(self):
        with open(self.path, "w") as f:
            json.dump({"entries": self.seen}, f)

    def stats(self):
        return {"entries": self.seen}


PARSER = Plugin("acme_parser", lambda config: parse)
EXPORTER = Plugin(
    "acme_count",
    lambda config, ctx: [CountingExporter(ctx.paths.data_dir / config["file"])],
    {"type": "object", "properties": {"file": {"type": "string", "default": "acme-count.json"}}},
)
'''


def _install_addon(site: Path) -> None:
    """What `pip install acme-agent` leaves in site-packages: the module and its dist-info."""
    site.mkdir(parents=True)
    (site / "acme_agent.py").write_text(textwrap.dedent(ADDON))
    info = site / "acme_agent-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-agent\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[agent_collector.parsers]\nacme_parser = acme_agent:PARSER\n\n"
        "[agent_collector.exporters]\nacme_count = acme_agent:EXPORTER\n")


def test_an_installed_package_adds_a_parser_and_an_exporter(tmp_path: Path) -> None:
    home = tmp_path / "home"
    paths = resolve_paths(str(home))
    _install_addon(tmp_path / "site")
    sessions = home / "acme" / "sessions"
    sessions.mkdir(parents=True)
    lines = [{"ts": 1_796_000_000 + i, "session": "s1", "id": f"r{i}", "in": 10 * i, "out": i} for i in (1, 2, 3)]
    (sessions / "s1.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    paths.agents_override_dir.mkdir(parents=True)
    (paths.agents_override_dir / "acme.json").write_text(json.dumps({
        "id": "acme", "name": "Acme", "parser": "acme_parser", "provider": "acme.ai",
        "detect": {"paths": ["~/acme"]}, "integrations": [],
        "sources": [{"kind": "jsonl", "name": "sessions", "globs": ["~/acme/sessions/*.jsonl"]}],
    }))
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(tmp_path / "site")}
    done = subprocess.run([sys.executable, "-m", "collector", "collect", "--once", "--home", str(home), "-q"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    entries = [e for e in read_output(paths.output_dir) if e["gen_ai.agent.type"] == "acme"]
    assert sorted(e["gen_ai.usage.input_tokens"] for e in entries) == [10, 20, 30]
    assert {e["gen_ai.provider.name"] for e in entries} == {"acme.ai"}, "the provider comes from the definition"
    assert json.loads((paths.data_dir / "acme-count.json").read_text()) == {"entries": len(entries)}


def test_without_the_package_the_agent_is_reported_not_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    paths = resolve_paths(str(home))
    paths.agents_override_dir.mkdir(parents=True)
    (paths.agents_override_dir / "acme.json").write_text(json.dumps({
        "id": "acme", "name": "Acme", "parser": "acme_parser", "detect": {}, "integrations": [], "sources": []}))
    done = subprocess.run([sys.executable, "-m", "collector", "agents", "list", "--home", str(home)],
                          env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "acme.json: at $.parser: no parser 'acme_parser' is registered" in done.stderr + done.stdout


def test_run_refuses_a_definition_no_registry_can_serve(tmp_path: Path) -> None:
    """As for a definition that breaks the schema: `run` names the file and the problem and does not start."""
    home = tmp_path / "home"
    paths = resolve_paths(str(home))
    paths.agents_override_dir.mkdir(parents=True)
    (paths.agents_override_dir / "acme.json").write_text(json.dumps({
        "id": "acme", "name": "Acme", "parser": "acme_parser", "detect": {}, "integrations": [],
        "sources": [{"kind": "telepathy"}]}))
    done = subprocess.run([sys.executable, "-m", "collector", "run", "--home", str(home)],
                          env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "acme.json: at $.parser: no parser 'acme_parser' is registered" in done.stderr
