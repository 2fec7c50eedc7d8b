"""The Claude Code drop-in plugin: its files, its marker, and its hooks, which run the real spool hook
script: no hook uses the network or carries the ingest secret (issue 22 item 1)."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from collector.deploy.http_plugin import (
    MANAGED_BY,
    MATCHER_EVENTS,
    configured_port,
    hooks_document,
    http_plugin_edits,
    is_managed_manifest,
    remove_plugin,
    write_plugin,
)
from collector.deploy.model import DeployError
from collector.ingest.secret import choose_port, ensure_token, ingest_port, read_token
from collector.paths import Paths

SPEC = {"kind": "http_plugin_dir", "dir": "~/.claude/skills/agent-collector"}


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    home = tmp_path / "home"
    home.mkdir()
    return Paths(home=home, config_dir=tmp_path / "config", data_dir=tmp_path / "data")


def plugin_root(paths: Paths) -> Path:
    return paths.home / ".claude" / "skills" / "agent-collector"


def test_every_hook_spools_and_none_uses_the_network_or_the_secret(paths: Paths) -> None:
    token = ensure_token(paths)  # install makes it first
    doc = hooks_document("claude-code", {}, paths)
    assert doc["description"].startswith("agent-collector:managed")
    for event, groups in doc["hooks"].items():
        (group,) = groups
        (hook,) = group["hooks"]
        assert 0 < hook["timeout"] <= 5, event  # explicit, and short
        assert ("matcher" in group) == (event in MATCHER_EVENTS)
        assert hook["type"] == "command", event
        assert "agent-collector-hook.sh" in hook["command"] and f" {event} " in hook["command"] + " "
        assert "curl" not in hook["command"] and "http" not in hook["command"]
    assert token not in json.dumps(doc) and "X-Agent-Collector-Token" not in json.dumps(doc)
    assert {"SessionStart", "Setup", "UserPromptSubmit", "Stop", "StopFailure", "PermissionRequest",
            "Elicitation", "ElicitationResult", "SessionEnd"} <= set(doc["hooks"])
    assert "WorktreeCreate" not in doc["hooks"]  # its hooks replace Claude's own behaviour


def test_write_creates_exactly_the_two_files_with_the_marker(paths: Paths) -> None:
    root = write_plugin("claude-code", SPEC, paths, port=4555)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == [".claude-plugin/plugin.json", "hooks/hooks.json"]
    manifest = json.loads((root / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "agent-collector"
    assert manifest["metadata"]["managedBy"] == MANAGED_BY
    hooks = json.loads((root / "hooks" / "hooks.json").read_text())
    assert "agent-collector-hook.sh" in hooks["hooks"]["Stop"][0]["hooks"][0]["command"]
    write_plugin("claude-code", SPEC, paths, port=4555)  # again: idempotent
    assert json.loads((root / "hooks" / "hooks.json").read_text()) == hooks
    assert stat.S_IMODE((root / "hooks" / "hooks.json").stat().st_mode) == 0o600


def test_the_secret_is_made_once_private_and_never_in_the_plugin(paths: Paths) -> None:
    assert read_token(paths) is None
    root = write_plugin("claude-code", SPEC, paths, port=4319)
    token = read_token(paths)
    assert token is not None and len(token) == 64 and int(token, 16) >= 0
    for name in ("ingest.token", "ingest.header"):
        assert stat.S_IMODE((paths.state_dir / name).stat().st_mode) == 0o600
    assert (paths.state_dir / "ingest.header").read_text() == f"X-Agent-Collector-Token: {token}\n"
    assert not [f for f in root.rglob("*") if f.is_file() and token in f.read_text()]
    assert ensure_token(paths) == token, "made once, then kept"


def test_port_zero_is_chosen_per_user_and_kept(paths: Paths) -> None:
    port = configured_port(paths)  # no config: ingest.port = 0
    assert 4320 <= port < 5320
    assert not (paths.state_dir / "ingest.port").exists(), "only install and the daemon record it"
    assert ingest_port(paths, 0, record=True) == port
    assert (paths.state_dir / "ingest.port").read_text() == f"{port}\n"
    assert configured_port(paths) == port and ingest_port(paths, 4777) == 4777
    taken = {4320 + (1000 % 1000)}
    assert choose_port(lambda p: p not in taken, uid=1000) == 4321
    assert choose_port(lambda p: True, uid=1001) == 4321 and choose_port(lambda p: True, uid=1999) == 5319


def test_port_comes_from_the_config(paths: Paths) -> None:
    paths.config_dir.mkdir(parents=True)
    paths.config_file.write_text("[ingest]\nport = 4777\n")
    assert configured_port(paths) == 4777
    root = write_plugin("claude-code", SPEC, paths)
    manifest = json.loads((root / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["metadata"]["endpoint"] == "http://127.0.0.1:4777"


def test_a_foreign_plugin_directory_is_never_replaced_or_removed(paths: Paths) -> None:
    root = plugin_root(paths)
    (root / ".claude-plugin").mkdir(parents=True)
    foreign = b'{"name": "agent-collector", "description": "somebody else\'s"}'
    (root / ".claude-plugin" / "plugin.json").write_bytes(foreign)
    with pytest.raises(DeployError, match="did not write"):
        http_plugin_edits("claude-code", SPEC, paths, port=4319)
    assert remove_plugin(SPEC, paths) is False
    assert (root / ".claude-plugin" / "plugin.json").read_bytes() == foreign


def test_remove_takes_only_our_files(paths: Paths) -> None:
    root = write_plugin("claude-code", SPEC, paths, port=4319)
    (root / "NOTES.md").write_text("the user's own file")
    assert remove_plugin(SPEC, paths) is True
    assert sorted(p.name for p in root.rglob("*")) == ["NOTES.md"]
    (root / "NOTES.md").unlink()
    write_plugin("claude-code", SPEC, paths, port=4319)
    assert remove_plugin(SPEC, paths) is True
    assert not root.exists()


def test_edits_follow_the_deploy_protocol(paths: Paths) -> None:
    manifest_edit, hooks_edit = http_plugin_edits("claude-code", SPEC, paths, port=4319)
    assert manifest_edit.check(None).level == "missing"
    content = manifest_edit.apply(None)
    assert content is not None and is_managed_manifest(content)
    assert manifest_edit.check(content).level == "ok"
    assert manifest_edit.strip(content) is None
    assert manifest_edit.check(b'{"name": "x"}').level == "conflict"
    older = json.dumps({"name": "agent-collector", "metadata": {"managedBy": MANAGED_BY}}).encode()
    assert manifest_edit.check(older).level == "outdated"
    hooks = hooks_edit.apply(None)
    assert hooks is not None and hooks_edit.strip(hooks) is None
    assert hooks_edit.strip(b"{}") == b"{}"  # not ours: kept


# -- the hooks run: a real sh and the real spool hook script --------------------------------------------

PAYLOAD: dict[str, Any] = {"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup",
                           "cwd": "/work/p"}


def spooled(paths: Paths) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted((paths.spool_dir / "claude-code").glob("*.jsonl"))
            for line in f.read_text().splitlines()]


@pytest.mark.parametrize("event", ["SessionStart", "UserPromptSubmit", "Stop"])
def test_a_hook_appends_its_payload_to_the_spool_and_prints_nothing(paths: Paths, event: str) -> None:
    command = hooks_document("claude-code", {}, paths)["hooks"][event][0]["hooks"][0]["command"]
    result = subprocess.run(["sh", "-c", command], input=json.dumps(PAYLOAD), text=True, capture_output=True,
                            timeout=10, check=False)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")  # hooks never print
    (line,) = spooled(paths)
    assert line["event"] == event and line["agent"] == "claude-code" and line["payload"] == PAYLOAD


def test_the_deploy_engine_installs_and_removes_the_plugin(paths: Paths) -> None:
    from collector.definitions import load_definitions
    from collector.definitions.loader import AgentDefinition
    from collector.deploy import install_agent, integration_state, uninstall_agent
    from collector.deploy.model import Action, State

    base = load_definitions().agents["claude-code"]
    defn = AgentDefinition("claude-code", {**base.raw, "integrations": [SPEC]}, base.files)
    assert {c.action for c in install_agent(defn, paths)} == {Action.CREATE}
    assert [s.state for s in integration_state(defn, paths)] == [State.IN_PLACE]
    assert {c.action for c in install_agent(defn, paths)} == {Action.UNCHANGED}
    assert {c.action for c in uninstall_agent(defn, paths)} == {Action.DELETE}
    assert not (paths.home / ".claude").exists() or not any((paths.home / ".claude").rglob("*"))
