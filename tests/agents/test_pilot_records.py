"""LoongSuite Pilot's records as Pilot writes them: the onboarding guide's example record, verbatim, collected
by the real `collect --once` from where the guide puts it (a JSONL file under ~/.loongsuite-pilot/logs/); and
the forms it uses, one by one, through the canonical parser: string nanoseconds, Pilot's field names,
``skill.use`` and ``other``, a ``tool.result`` without status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support import ROOT, assert_schema_valid, make_paths, read_output
from support.collect_once import collect_cli

from collector.agents.canonical import parse
from collector.model import RawRecord

EXAMPLE = ROOT / "tests" / "fixtures" / "canonical" / "pilot" / "onboarding-example.jsonl"
AGENT = "my-agent"  # the id the guide's record names


def definition() -> dict[str, Any]:
    return {"id": AGENT, "name": "Pilot onboarding example", "parser": "canonical", "detect": {},
            "integrations": [],
            "sources": [{"kind": "jsonl", "name": "pilot-log",
                         "globs": [f"~/.loongsuite-pilot/logs/{AGENT}/*.jsonl"]}]}


def test_the_onboarding_guides_record_verbatim(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    logs = paths.home / ".loongsuite-pilot" / "logs" / AGENT
    logs.mkdir(parents=True)
    (logs / f"{AGENT}-2026-05-12.jsonl").write_bytes(EXAMPLE.read_bytes())
    paths.agents_override_dir.mkdir(parents=True)
    (paths.agents_override_dir / f"{AGENT}.json").write_text(json.dumps(definition()))
    status = collect_cli(paths)
    entries = [e for e in read_output(paths.output_dir) if e["event.name"] != "session.status"]
    assert_schema_valid(entries)
    [entry] = entries
    assert entry["event.name"] == "tool.result"
    assert entry["time_unix_nano"] == 1778586618041000000  # the record's own time, not the read time
    assert entry["duration_ms"] == 423  # Pilot's gen_ai.tool.call.duration
    assert (entry["gen_ai.session.id"], entry["gen_ai.tool.call.id"], entry["gen_ai.tool.name"]) == \
        ("session-id", "call-id", "bash")
    assert entry["gen_ai.provider.name"] == "openai" and entry["gen_ai.agent.type"] == AGENT
    assert "collector.invalid_fields" not in entry and "gen_ai.tool.call.duration" not in entry
    assert status["quarantine"]["records"] == 0, status["quarantine"]


def one(data: dict[str, Any]) -> dict[str, Any]:
    return parse(RawRecord(AGENT, "jsonl", data, "s", "0", 1796032800000000000))[0].to_dict()


def test_an_unusable_time_is_named_and_the_read_time_stands_in() -> None:
    entry = one({"event.name": "user.prompt", "gen_ai.session.id": "s", "time_unix_nano": "soon"})
    assert entry["time_unix_nano"] == 1796032800000000000
    assert any(n.startswith("time_unix_nano") for n in entry["collector.invalid_fields"])


def test_pilot_names_are_read_as_ours_and_ours_win() -> None:
    entry = one({"event.name": "llm.response", "gen_ai.session.id": "s", "gen_ai.usage.total_cost": 0.25,
                 "workspace.current_root": "/w"})
    assert entry["gen_ai.usage.cost_usd"] == 0.25 and entry["workspace.root"] == "/w"
    both = one({"event.name": "tool.call", "gen_ai.session.id": "s", "gen_ai.tool.call.id": "c",
                "gen_ai.tool.call.duration": 5, "duration_ms": 7})
    assert both["duration_ms"] == 7


def test_skill_use_other_and_a_result_without_status() -> None:
    assert one({"event.name": "skill.use", "gen_ai.session.id": "s", "gen_ai.skill.name": "review"})[
        "event.name"] == "skill.use"
    assert one({"event.name": "other", "gen_ai.session.id": "s"})["event.name"] == "other"
    prompt = one({"event.name": "other", "gen_ai.session.id": "s", "gen_ai.input.messages_delta": "hi"})
    assert prompt["event.name"] == "user.prompt"
    assert one({"event.name": "tool.result", "gen_ai.session.id": "s", "gen_ai.tool.call.id": "c"})[
        "event.name"] == "tool.result"


def _collect_with_extra(tmp_path: Path, config: str) -> dict[str, Any]:
    paths = make_paths(tmp_path)
    logs = paths.home / ".loongsuite-pilot" / "logs" / AGENT
    logs.mkdir(parents=True)
    record = {**json.loads(EXAMPLE.read_text()), "pilot.custom_field": "kept only on request"}
    (logs / f"{AGENT}-2026-05-12.jsonl").write_text(json.dumps(record) + "\n")
    paths.agents_override_dir.mkdir(parents=True)
    (paths.agents_override_dir / f"{AGENT}.json").write_text(json.dumps(definition()))
    paths.config_dir.mkdir(parents=True, exist_ok=True)
    (paths.config_dir / "config.toml").write_text(config)
    collect_cli(paths)
    [entry] = [e for e in read_output(paths.output_dir) if e["event.name"] == "tool.result"]
    return entry


def test_agent_fields_are_left_out_of_the_output_by_default(tmp_path: Path) -> None:
    entry = _collect_with_extra(tmp_path, "")
    assert not [k for k in entry if k.startswith(f"agent.{AGENT}.")], entry
    assert entry["duration_ms"] == 423  # the record's known fields are all there


def test_export_agent_fields_keeps_them(tmp_path: Path) -> None:
    entry = _collect_with_extra(tmp_path, "[collector]\nexport_agent_fields = true\n")
    assert entry[f"agent.{AGENT}.pilot.custom_field"] == "kept only on request"
