"""Reading a LoongSuite Pilot home into a plan: every setting carried, or named as not carried; broken and
hostile files are lines, never a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import make_paths

from collector.cli.pilot_import import Plan, plan_import
from collector.daemon.plugins import load_agents

OURS = set(load_agents(None).agents)
HOOK_AGENT = {"id": "my-agent", "deployMode": "hook", "hook": {},
              "input": {"type": "hook-jsonl", "logDir": "$PILOT_DATA/logs/my-agent"}}


def plan(tmp_path: Path, files: dict[str, Any]) -> Plan:
    paths = make_paths(tmp_path)
    pilot = paths.home / ".loongsuite-pilot"
    (pilot / "agents.d.local").mkdir(parents=True)
    (pilot / "agents.d.local" / "my-agent.json").write_text(json.dumps(HOOK_AGENT))
    for name, content in files.items():
        (pilot / name).write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    return plan_import(pilot, paths, OURS)


def test_string_headers_a_switched_off_trace_output_and_agent_control(tmp_path: Path) -> None:
    got = plan(tmp_path, {"config.json": {"collectTrace": "false", "otlpTrace": {
        "endpoint": "https://otel.example:4318", "headers": "authorization=Bearer%20t,x-a=1"}},
        "agent-control.json": {"version": 3, "tools": {"my-agent": "off", "codex": "off", "cursor": "on"}}})
    [backend] = got.config["otlp"]["backends"]
    assert backend["endpoint"] == "https://otel.example:4318" and backend["enabled"] is False
    assert backend["headers"] == {"authorization": "Bearer t", "x-a": "1"}
    assert got.config["agents"] == {"my-agent": {"enabled": False}}  # codex was not imported: not ours to set
    assert not any("Bearer" in line for line in got.lines)  # a header's value is never printed


def test_unset_content_capture_is_said(tmp_path: Path) -> None:
    got = plan(tmp_path, {"config.json": {"agents": {"my-agent": {"enabled": True}}}})
    assert "agents" not in got.config
    assert any("Pilot's default is on" in line and "my-agent" in line for line in got.lines)


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b"x" * (2 << 20)])
def test_a_broken_config_is_one_line(tmp_path: Path, content: bytes) -> None:
    got = plan(tmp_path, {"config.json": content})
    assert got.config == {} and [c.pilot_id for _, c in got.conversions] == ["my-agent"]
    assert any(line.startswith("config: ") and "nothing carried" in line for line in got.lines)


def test_reserved_or_odd_attributes_are_named_not_carried(tmp_path: Path) -> None:
    got = plan(tmp_path, {"span-attributes.json": {"gen_ai.agent.name": "x", "team": "a", "bad key": "b",
                                                   "n": 3, "nested": {"a": 1}}})
    assert got.live_attributes == {"team": "a", "n": "3"}
    refused = [line for line in got.lines if "not carried" in line]
    assert len(refused) == 3 and any("gen_ai.agent.name" in line for line in refused)


def test_a_definition_file_that_is_not_pilots_is_skipped(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    local = paths.home / ".loongsuite-pilot" / "agents.d.local"
    local.mkdir(parents=True)
    (local / "ours.json").write_text(json.dumps({"id": "x", "parser": "canonical"}))
    (local / "list.json").write_text("[]")
    got = plan_import(paths.home / ".loongsuite-pilot", paths, OURS)
    assert got.conversions == [] and sum(line.startswith("skipped ") for line in got.lines) == 2
