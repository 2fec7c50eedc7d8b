"""`agent-collector import loongsuite` on a Pilot home built from Pilot's documented examples
(tests/fixtures/loongsuite-pilot/README.md): the converted definitions collect Pilot's log record through
the real `collect --once`, the settings land in our config, `--dry-run` changes no byte, and Pilot's hooks
come out of the agents we hook ourselves and go back byte for byte."""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path

import pytest
from support import FIXTURES, make_paths, read_output
from support.collect_once import collect_cli
from support.otlp_receiver import OtlpReceiver

from collector.cli.main import main
from collector.config import schema as config_schema
from collector.paths import Paths

PILOT_HOME = FIXTURES / "loongsuite-pilot" / "home"
PILOT_MARK = ".loongsuite-pilot/hooks/"
# Claude Code's settings as Pilot's hook deploy leaves them (nested format, kebab-case event sub-command:
# Pilot's agents.d/claude-code.json), beside a hook of the user's own that must stay.
CLAUDE_SETTINGS = """{
  "model": "opus",
  "hooks": {
    "Stop": [
      {
        "matcher": "*",
        "hooks": [
          {"type": "command", "command": "~/bin/my-own-stop-hook"},
          {"type": "command", "command": "HOME/.loongsuite-pilot/hooks/claude-code-loongsuite-pilot-hook.sh stop"}
        ]
      }
    ],
    "SubagentStop": [
      {"matcher": "*", "hooks": [{"type": "command",
        "command": "HOME/.loongsuite-pilot/hooks/claude-code-loongsuite-pilot-hook.sh subagent-stop"}]}
    ]
  }
}
"""
# Kimi CLI's flat [[hooks]] tables (Pilot's agents.d/kimi.json: ~/.kimi/config.toml, flat: Stop, StopFailure).
KIMI_CONFIG = """default_model = "kimi-k2"

[[hooks]]
event = "Stop"
command = "HOME/.loongsuite-pilot/hooks/kimi-loongsuite-pilot-hook.sh"

[[hooks]]
event = "Stop"
command = "notify-send done"

[[hooks]]
event = "StopFailure"
command = "HOME/.loongsuite-pilot/hooks/kimi-loongsuite-pilot-hook.sh"
"""

# OpenCode's config with Pilot's plugin spec injected (Pilot's agents.d/opencode.json: pluginSpec
# file://$PILOT_DATA/plugins/opencode in the plugin list), beside a plugin of the user's own.
OPENCODE_CONFIG = """{
  "$schema": "https://opencode.ai/config.json",
  "plugin": ["file://HOME/.loongsuite-pilot/plugins/opencode", "opencode-my-plugin"]
}
"""


@pytest.fixture
def paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Paths:
    paths = make_paths(tmp_path)
    shutil.copytree(PILOT_HOME, paths.home / ".loongsuite-pilot")
    monkeypatch.setenv("AGENT_COLLECTOR_CONFIG_DIR", str(paths.config_dir))
    monkeypatch.setenv("AGENT_COLLECTOR_DATA_DIR", str(paths.data_dir))
    return paths


def run(paths: Paths, *options: str) -> int:
    return main(["import", "loongsuite", "--home", str(paths.home), *options])


def with_agent_files(paths: Paths) -> dict[Path, bytes]:
    files = {paths.home / ".claude" / "settings.json": CLAUDE_SETTINGS,
             paths.home / ".kimi" / "config.toml": KIMI_CONFIG,
             paths.home / ".config" / "opencode" / "opencode.json": OPENCODE_CONFIG}
    for path, text in files.items():
        path.parent.mkdir(parents=True)
        path.write_text(text.replace("HOME/", f"{paths.home}/"))
    return {path: path.read_bytes() for path in files}


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_import_then_collect_once_reads_pilots_record(paths: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    receiver = OtlpReceiver().start()
    pilot_config = paths.home / ".loongsuite-pilot" / "config.json"
    settings = json.loads(pilot_config.read_text())
    settings["otlpTrace"]["traceEndpoint"] = f"{receiver.endpoint}/v1/traces"  # the fixture's, on a free port
    pilot_config.write_text(json.dumps(settings))
    try:
        collected(paths, capsys, receiver)
    finally:
        receiver.stop()


def collected(paths: Paths, capsys: pytest.CaptureFixture[str], receiver: OtlpReceiver) -> None:
    assert run(paths) == 0
    out = capsys.readouterr().out
    assert "trae-agent: not converted" in out and "input.type 'log-watch-polling'" in out
    assert "claude-code: converted: our definition 'claude-code' is used" in out
    written = sorted(p.name for p in paths.agents_override_dir.iterdir())
    assert written == ["my-agent.json", "my-plugin-agent.json"]
    config = tomllib.loads(paths.config_file.read_text())
    assert config["collector"]["user_id"] == "team-member-1"
    assert config["agents"] == {"claude-code": {"content_capture": True}, "my-agent": {"content_capture": False}}
    [backend] = config["otlp"]["backends"]
    assert backend["traces"]["endpoint"] == f"{receiver.endpoint}/v1/traces"
    assert backend["headers"] == {"x-team": "platform"}
    assert backend["resource_attributes"] == {"service.name": "team-agents"}
    live = json.loads((paths.config_dir / "attributes.json").read_text())
    if "attributes" in config_schema()["properties"]:  # Pilot's globalSpanAttributes -> [attributes]
        assert config["attributes"] == {"team": "platform", "cost_center": "42"} and live == {"release": "2026.12"}
    else:  # no [attributes] table in this config: the live file holds them all
        assert live == {"team": "platform", "cost_center": "42", "release": "2026.12"}
    assert "sls: not carried" in out

    status = collect_cli(paths)
    entries = [e for e in read_output(paths.output_dir) if not e["event.name"].startswith("session.")]
    assert sorted(e["gen_ai.agent.type"] for e in entries) == ["my-agent", "my-plugin-agent"]  # hook, plugin
    for entry in entries:
        assert (entry["event.name"], entry["gen_ai.tool.call.id"], entry["time_unix_nano"]) == \
            ("tool.result", "call-id", 1778586618041000000)
        assert entry["user.id"] == "team-member-1"  # the carried user id
    assert status["quarantine"]["records"] == 0
    spans = receiver.spans()  # Pilot's trace backend, carried over: the record's turn arrives there
    assert spans and {s["resource"].get("service.name") for s in spans} == {"team-agents"}
    assert any(s["attributes"].get("gen_ai.tool.call.id") == "call-id" for s in spans)
    assert all(h.get("x-team") == "platform" for h in receiver.received.headers)


def test_dry_run_changes_no_byte(paths: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    with_agent_files(paths)
    before = snapshot(paths.home.parent)
    assert run(paths, "--dry-run", "--remove-pilot-hooks") == 0
    out = capsys.readouterr().out
    assert snapshot(paths.home.parent) == before
    assert "would write" in out and "claude-code: would remove 2 LoongSuite Pilot hook(s)" in out
    assert "kimi: would remove 2" in out


def test_pilot_hooks_removed_and_restored_byte_for_byte(paths: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    originals = with_agent_files(paths)
    claude, kimi, opencode = originals
    assert run(paths, "--remove-pilot-hooks") == 0
    settings = json.loads(claude.read_text())
    assert settings["model"] == "opus"
    assert settings["hooks"] == {"Stop": [{"matcher": "*", "hooks": [
        {"type": "command", "command": "~/bin/my-own-stop-hook"}]}]}
    assert [h["command"] for h in tomllib.loads(kimi.read_text())["hooks"]] == ["notify-send done"]
    assert tomllib.loads(kimi.read_text())["default_model"] == "kimi-k2"
    assert json.loads(opencode.read_text())["plugin"] == ["opencode-my-plugin"]
    assert run(paths, "--remove-pilot-hooks") == 0  # again: nothing more to remove, the saved copy stays
    assert run(paths, "--restore-pilot-hooks") == 0
    assert {p: p.read_bytes() for p in originals} == originals
    assert "restored" in capsys.readouterr().out


def test_restore_leaves_a_file_changed_since(paths: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    claude, _, _ = with_agent_files(paths)
    assert run(paths, "--remove-pilot-hooks") == 0
    claude.write_text('{"hooks": {}}\n')
    assert run(paths, "--restore-pilot-hooks") == 0
    assert claude.read_text() == '{"hooks": {}}\n'
    assert "changed since Pilot's hooks were removed; not restored" in capsys.readouterr().out


def test_a_missing_pilot_home_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "home").mkdir()
    assert main(["import", "loongsuite", "--home", str(tmp_path / "home")]) == 2
    assert "no LoongSuite Pilot home there" in capsys.readouterr().err


def test_a_running_pilot_is_named(paths: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    (paths.home / ".loongsuite-pilot" / "loongsuite-pilot.pid").write_text(f"{os.getpid()}\n")
    assert run(paths, "--dry-run", "--remove-pilot-hooks") == 0
    assert f"LoongSuite Pilot's daemon runs (pid {os.getpid()})" in capsys.readouterr().out


def test_json_says_each_definitions_result(paths: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(paths, "--dry-run", "--json") == 0
    out = json.loads(capsys.readouterr().out)
    results = {d["id"]: d["result"] for d in out["definitions"]}
    assert results == {"claude-code": "ours", "my-agent": "converted", "my-plugin-agent": "converted",
                       "trae-agent": "not converted"}
    [trae] = [d for d in out["definitions"] if d["id"] == "trae-agent"]
    assert trae["reasons"] and trae["written"] is None


def test_an_existing_config_is_kept_beside_and_merged(paths: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    paths.agents_override_dir.mkdir(parents=True)
    (paths.agents_override_dir / "acme.json").write_text(json.dumps({
        "id": "acme", "name": "Acme", "parser": "canonical", "detect": {}, "integrations": [],
        "sources": [{"kind": "jsonl", "globs": ["~/.acme/*.jsonl"]}]}))
    assert main(["config", "init", "--home", str(paths.home)]) == 0
    with paths.config_file.open("a") as f:
        f.write("\n[agents.acme]\ncontent_capture = true\n")
    before = paths.config_file.read_bytes()
    assert run(paths) == 0
    assert (paths.config_dir / "config.toml.before-pilot-import").read_bytes() == before
    merged, earlier = tomllib.loads(paths.config_file.read_text()), tomllib.loads(before.decode())
    assert merged["agents"]["acme"] == {"content_capture": True}  # the user's own agent stays
    assert merged["masking"] == earlier["masking"] and merged["content"] == earlier["content"]
    assert merged["collector"]["user_id"] == "team-member-1"
    assert main(["config", "check", "--home", str(paths.home)]) == 0


def test_switch_and_back_through_install_and_uninstall(paths: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    """Pilot's hooks out, ours in (`install`), ours out (`uninstall`), Pilot's back: the same bytes."""
    claude = paths.home / ".claude" / "settings.json"
    original = with_agent_files(paths)[claude]
    paths.agents_override_dir.mkdir(parents=True)
    (paths.agents_override_dir / "claude-code.json").write_text('{"id": "claude-code", "integration_variant": '
                                                                 '"settings"}')
    assert run(paths, "--remove-pilot-hooks") == 0
    assert main(["install", "--agent", "claude-code", "--home", str(paths.home)]) == 0
    hooked = json.loads(claude.read_text())["hooks"]
    assert "PreToolUse" in hooked and PILOT_MARK not in claude.read_text()  # ours only
    assert main(["uninstall", "--agent", "claude-code", "--home", str(paths.home)]) == 0
    assert run(paths, "--restore-pilot-hooks") == 0
    assert claude.read_bytes() == original
