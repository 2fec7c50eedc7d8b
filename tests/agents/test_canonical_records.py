"""Canonical records: an agent defined by one agents.d file (``"parser": "canonical"``) whose plugin, a
POSIX shell script with no Python, writes records in our schema's names, through our real hook script into
the spool and into a JSONL file of its own. Collected end to end by the real `collect --once`: fields
checked against the schema (a wrong type dropped and named, a record the schema refuses quarantined with
its reason, the neighbours kept), extra fields under agent.<id>.*, deterministic ids (a second run and
the same record in both inputs make no duplicate)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, assert_no_duplicates, assert_schema_valid, read_output

from collector.agents.canonical import NotCanonical, parse
from collector.model import RawRecord

HOOK = ROOT / "hooks" / "agent-collector-hook.sh"
AGENT = "acme-shell"

PLUGIN = ROOT / "tests" / "fixtures" / "canonical" / "acme-plugin.sh"  # sh + printf, no Python


def definition() -> dict[str, Any]:
    return {"id": AGENT, "name": "Acme (shell plugin)", "parser": "canonical", "detect": {}, "integrations": [],
            "sources": [{"kind": "spool", "name": "hooks"},
                        {"kind": "jsonl", "name": "log", "globs": ["~/.acme/*.jsonl"]}]}


def run(home: Path, data: Path, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_COLLECTOR_", "XDG_"))}
    env.update(HOME=str(home), AGENT_COLLECTOR_HOME=str(home), AGENT_COLLECTOR_DATA_DIR=str(data),
               AGENT_COLLECTOR_CONFIG_DIR=str(config))
    result = subprocess.run([sys.executable, "-m", "collector", *args], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return result


def test_an_agent_of_one_definition_file_end_to_end(tmp_path: Path) -> None:
    home, data, config = tmp_path / "home", tmp_path / "data", tmp_path / "config"
    (home / ".acme").mkdir(parents=True)
    (config / "agents.d").mkdir(parents=True)
    (config / "agents.d" / f"{AGENT}.json").write_text(json.dumps(definition()))
    (config / "config.toml").write_text("[collector]\nexport_agent_fields = true\n")  # asserted below
    subprocess.run(["sh", str(PLUGIN), str(data / "spool"), str(home / ".acme" / "events.jsonl")],
                   env={"PATH": "/usr/bin:/bin", "HOOK": str(HOOK)}, check=True, timeout=60)

    listed = run(home, data, config, "agents", "list").stdout
    assert AGENT in listed
    run(home, data, config, "collect", "--once", "-q")
    entries = [e for e in read_output(data / "output") if e["event.name"] != "session.status"]
    assert_schema_valid(entries)
    assert_no_duplicates(entries)
    by_name = {e["event.name"]: e for e in entries}
    assert sorted(by_name) == ["llm.response", "session.start", "tool.call", "tool.result", "user.prompt"]
    assert len(entries) == 5  # the prompt written twice (spool and log) is one entry
    assert {e["gen_ai.agent.type"] for e in entries} == {AGENT}
    start = by_name["session.start"]
    assert start["agent.acme-shell.acme.build"] == "42" and start["source.kind"] == "hook"
    assert start["time_unix_nano"] == 1796032800000000000
    response = by_name["llm.response"]
    assert (response["gen_ai.usage.input_tokens"], response["gen_ai.usage.output_tokens"],
            response["gen_ai.usage.cache_read.input_tokens"]) == (1200, 80, 1000)
    assert response["agent.acme-shell.mood"] == "calm" and response["source.kind"] == "transcript"
    call = by_name["tool.call"]
    assert "duration_ms" not in call
    assert call["collector.invalid_fields"] == ['duration_ms: must match type ["integer","number"]']
    assert "gen_ai.input.messages" not in by_name["user.prompt"]  # content capture is off: length only
    assert by_name["user.prompt"]["gen_ai.input.messages.length"] > 0

    status = json.loads((data / "state" / "status.json").read_text())
    assert status["quarantine"]["by_source"] == {
        f"{AGENT}:hook": {"parse: event.name is missing or not one of the schema's events": 1}}

    run(home, data, config, "collect", "--once", "-q")  # a second run: positions committed, nothing new
    again = [e for e in read_output(data / "output") if e["event.name"] != "session.status"]
    assert len(again) == 5


def record(data: Any, kind: str = "jsonl") -> RawRecord:
    return RawRecord(AGENT, kind, data, "s", "0", 1796032800000000000)


def test_ids_are_deterministic_and_namespaced() -> None:
    one = parse(record({"event.name": "user.prompt", "gen_ai.session.id": "s", "event.id": "x"}))[0]
    two = parse(record({"event.name": "user.prompt", "gen_ai.session.id": "s", "event.id": "x", "extra": 1}))[0]
    other = parse(record({"event.name": "user.prompt", "gen_ai.session.id": "s2", "event.id": "x"}))[0]
    assert one.id == two.id != other.id
    content = parse(record({"event.name": "compaction", "gen_ai.session.id": "s", "time": 5}))[0]
    assert content.id == parse(record({"event.name": "compaction", "gen_ai.session.id": "s", "time": 5}))[0].id


@pytest.mark.parametrize(("data", "why"), [
    ({"gen_ai.session.id": "s"}, "event.name"),
    ({"event.name": "tool.call", "gen_ai.session.id": "s"}, "'gen_ai.tool.call.id' is a required property"),
    ({"event.name": "user.prompt", "gen_ai.usage.input_tokens": 3}, "must match not"),
    ([1, 2], "not a JSON object"),
])
def test_records_the_schema_refuses(data: Any, why: str) -> None:
    with pytest.raises(NotCanonical, match=why):
        parse(record({"payload": data}, "hook") if isinstance(data, list) else record(data))


def test_owned_fields_are_ours() -> None:
    entry = parse(record({"event.name": "error", "gen_ai.agent.type": "someone-else", "source.kind": "forged",
                          "schema.version": "9", "error.type": "boom"}))[0].to_dict()
    assert entry["gen_ai.agent.type"] == AGENT and entry["source.kind"] == "jsonl"
    assert entry["schema.version"] == "1.0" and entry["error.type"] == "boom"
