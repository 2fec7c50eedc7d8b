"""LoongSuite Pilot's definitions converted into ours: the documented examples (hook, plugin-inject, a
polling agent), the inputs that cannot be converted and why, hostile fields, and Pilot files placed in our
agents.d directly (converted on load, with notices that do not stop the start)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, make_paths

from collector.config import load_for
from collector.daemon.plugins import check_definition, load_agents
from collector.definitions.pilot_convert import convert, field_of, is_pilot_definition

PILOT = FIXTURES / "loongsuite-pilot" / "home" / "agents.d.local"
OURS = set(load_agents(None).agents)


def example(name: str) -> dict[str, Any]:
    return dict(json.loads((PILOT / f"{name}.json").read_text()))


def test_the_hook_example_reads_what_pilots_hook_writes() -> None:
    conv = convert(example("my-agent"), OURS, "~/.loongsuite-pilot")
    assert conv.definition is not None and not conv.reasons
    assert conv.definition["parser"] == "canonical" and conv.definition["integrations"] == []
    assert conv.definition["sources"] == [{"kind": "jsonl", "name": "pilot-log",
                                           "globs": ["~/.loongsuite-pilot/logs/my-agent/*-????-??-??.jsonl"]}]
    assert conv.definition["detect"] == {"paths": ["~/.my-agent"], "commands": ["my-agent"]}
    assert conv.definition["name"] == "My Agent" and conv.definition["idle_timeout_s"] == 1800
    assert [field_of(n) for n in conv.notes] == ["$.hook"]


def test_the_plugin_inject_example_converts_too() -> None:
    conv = convert(example("my-plugin-agent"), OURS)
    assert conv.definition is not None
    assert conv.definition["sources"][0]["globs"] == [
        "${LOONGSUITE_PILOT_DATA_DIR:-~/.loongsuite-pilot}/logs/my-plugin-agent/*-????-??-??.jsonl"]
    assert [field_of(n) for n in conv.notes] == ["$.pluginInject"]


def test_an_agent_we_ship_uses_ours() -> None:
    conv = convert(example("claude-code"), OURS)
    assert conv.ours == "claude-code" and conv.definition is None and conv.converted
    assert convert({"id": "qwen-code-cli", "deployMode": "hook"}, OURS).ours == "qwen-code"


@pytest.mark.parametrize(("change", "field"), [
    ({"input": {"type": "log-watch-polling", "trajectoryDir": "~/.trae-agent/trajectories"}}, "$.input.type"),
    ({"input": {"type": "qoder-sqlite", "dbPath": "~/x/local.db"}}, "$.input.type"),
    ({"input": {"type": "hook-jsonl", "logDir": "~/.my-agent/logs"}}, "$.input.logDir"),
    ({"input": {"type": "hook-jsonl", "logDir": "$PILOT_DATA/../../etc"}}, "$.input.logDir"),
    ({"input": {"type": "session-file-polling", "logDir": "$PILOT_DATA/logs/x", "filePattern": "../*"}},
     "$.input.filePattern"),
    ({"input": None}, "$.input"),
    ({"input": ["hook-jsonl"]}, "$.input"),
    ({"id": "../evil"}, "$.id"),
    ({"id": 7}, "$.id"),
])
def test_what_cannot_be_converted_says_which_field(change: dict[str, Any], field: str) -> None:
    data = {**example("my-agent"), **change}
    conv = convert(data, OURS)
    assert not conv.converted
    assert [field_of(r) for r in conv.reasons] == [field]


def test_the_documented_polling_agent_is_not_converted() -> None:
    conv = convert(example("trae-agent"), OURS)
    assert not conv.converted and "log-watch-polling" in conv.reasons[0]


def test_a_pilot_written_session_file_input_converts() -> None:
    conv = convert({"id": "dsh", "displayName": "DeepSeek Harness", "deployMode": "dsh-yaml-patch",
                    "dshYamlPatch": {}, "input": {"type": "session-file-polling", "logDir": "$PILOT_DATA/logs/dsh",
                                                  "filePattern": "dsh-*.jsonl"}}, OURS, "/p")
    assert conv.definition is not None and conv.definition["sources"][0]["globs"] == ["/p/logs/dsh/dsh-*.jsonl"]


def test_hostile_detection_is_dropped_with_a_note() -> None:
    conv = convert({**example("my-agent"), "detection": {"paths": [1, "$HOME/x"], "commands": "my-agent"}}, OURS)
    assert conv.definition is not None and conv.definition["detect"] == {}
    assert {"$.detection.paths", "$.detection.commands"} <= {field_of(n) for n in conv.notes}


def test_only_pilots_files_are_recognised() -> None:
    assert is_pilot_definition(example("my-agent"))
    assert not is_pilot_definition({"id": "claude-code", "integration_variant": "plugin"})
    assert not is_pilot_definition({"id": "x", "parser": "canonical", "input": {}})


def test_pilot_files_in_our_agents_d_load_with_notices(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    paths.agents_override_dir.mkdir(parents=True)
    for name in ("my-agent", "my-plugin-agent", "trae-agent", "claude-code"):
        (paths.agents_override_dir / f"{name}.json").write_bytes((PILOT / f"{name}.json").read_bytes())
    loaded = load_agents(paths.agents_override_dir)
    assert not loaded.problems
    assert loaded.agents["my-agent"].parser == "canonical"
    assert loaded.agents["my-plugin-agent"].sources[0]["kind"] == "jsonl"
    assert "trae-agent" not in loaded.agents
    assert loaded.agents["claude-code"].raw == load_agents(None).agents["claude-code"].raw  # ours, untouched
    said = {(Path(n.file).name, n.json_path) for n in loaded.notices}
    assert {("trae-agent.json", "$.input.type"), ("my-agent.json", "$.hook"),
            ("claude-code.json", "$.hook")} <= said
    assert all("LoongSuite Pilot" in n.reason for n in loaded.notices)
    load_for(paths, env={}, check=check_definition)  # the start is not refused


def test_a_local_definition_merges_over_the_installed_one_and_data_dir_moves_the_logs(tmp_path: Path) -> None:
    from collector.cli.pilot_import import plan_import

    paths = make_paths(tmp_path)
    pilot = paths.home / ".loongsuite-pilot"
    installed = pilot / "versions" / "1.4.1_abc" / "agents.d"
    installed.mkdir(parents=True)
    (installed / "my-agent.json").write_bytes((PILOT / "my-agent.json").read_bytes())
    (pilot / "agents.d.local").mkdir()
    (pilot / "agents.d.local" / "my-agent.json").write_text('{"id": "my-agent", "displayName": "Mine, locally"}')
    (pilot / "config.json").write_text(json.dumps({"dataDir": str(tmp_path / "pilot-data")}))
    [(_, conv)] = plan_import(pilot, paths, OURS).conversions
    assert conv.definition is not None and conv.definition["name"] == "Mine, locally"
    assert conv.definition["sources"][0]["globs"] == [f"{tmp_path / 'pilot-data'}/logs/my-agent/*-????-??-??.jsonl"]


def test_agents_list_says_the_notices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from collector.cli.main import main

    paths = make_paths(tmp_path)
    paths.agents_override_dir.mkdir(parents=True)
    (paths.agents_override_dir / "trae-agent.json").write_bytes((PILOT / "trae-agent.json").read_bytes())
    monkeypatch.setenv("AGENT_COLLECTOR_CONFIG_DIR", str(paths.config_dir))
    monkeypatch.setenv("AGENT_COLLECTOR_DATA_DIR", str(paths.data_dir))
    paths.home.mkdir()
    assert main(["agents", "list", "--home", str(paths.home)]) == 0
    err = capsys.readouterr().err
    assert "note: " in err and "trae-agent.json: at $.input.type: LoongSuite Pilot definition, not converted" in err
