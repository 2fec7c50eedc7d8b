"""Install / uninstall into the real config files of all five agents (as their CLIs wrote them, with
foreign hooks already in them): idempotence, byte-identical uninstall, foreign edits, bad files, dry run."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from support.deploy import (
    AGENTS,
    agent_snapshot,
    clear_env,
    definition,
    definitions,
    hook_commands,
    make_home,
    paths_for,
    snapshot,
)

from collector.deploy import Action, State, hook_command, install_agent, integration_state, uninstall_agent
from collector.deploy.jsonc import parse
from collector.paths import Paths

OURS = "agent-collector-hook.sh"
SETTINGS = {
    "claude-code": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "gemini-cli": ".gemini/settings.json",
    "qwen-code": ".qwen/settings.json",
}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Paths]:
    clear_env(monkeypatch)
    home = make_home(tmp_path)
    return home, paths_for(home)


def _load(path: Path) -> dict:
    return parse(path.read_text("utf-8")).value()  # JSONC-tolerant, also fine for JSON


@pytest.mark.parametrize("agent", list(SETTINGS))
def test_install_adds_a_hook_per_event_and_keeps_foreign_ones(env: tuple[Path, Paths], agent: str) -> None:
    home, paths = env
    defn = definitions()[agent]
    file = home / SETTINGS[agent]
    before = _load(file)
    changes = install_agent(defn, paths)
    assert not [c for c in changes if c.failed], changes
    after = _load(file)
    if SETTINGS[agent].endswith("hooks.json") or agent == "claude-code":
        json.loads(file.read_bytes())  # strict JSON stays strict JSON
    spec = defn.integrations[0]
    for event in spec["events"]:
        commands = [h["command"] for g in after["hooks"][event] for h in g["hooks"]]
        assert hook_command(paths, agent, event) in commands
        ours = [g for g in after["hooks"][event] if any(OURS in h["command"] for h in g["hooks"])]
        assert len(ours) == 1
        assert ("matcher" in ours[0]) == (event in spec.get("matcher_events", []))
    assert set(hook_commands(before)) <= set(hook_commands(after))  # every foreign hook survives
    assert {k: v for k, v in after.items() if k not in ("hooks", "hooksConfig")} == {
        k: v for k, v in before.items() if k not in ("hooks", "hooksConfig")
    }
    states = integration_state(defn, paths)
    expected = State.UNTRUSTED if agent == "codex" else State.IN_PLACE
    assert states[0].state is expected, states[0]


def test_copilot_hooks_are_a_plain_list_with_bash_and_timeout_sec(env: tuple[Path, Paths]) -> None:
    """Copilot CLI's layout: hooks.<event> = [{type, bash, timeoutSec}], no groups; the capture harness's
    own hooks (foreign) stay first and untouched."""
    home, paths = env
    defn = definitions()["copilot"]
    file = home / ".copilot" / "settings.json"
    before = _load(file)
    assert not [c for c in install_agent(defn, paths) if c.failed]
    after = _load(file)
    for event in defn.integrations[0]["events"]:
        hooks = after["hooks"][event]
        ours = [h for h in hooks if OURS in h.get("bash", "")]
        assert ours == [{"type": "command", "bash": hook_command(paths, "copilot", event), "timeoutSec": 5}]
        assert hooks[: len(before["hooks"].get(event, []))] == before["hooks"].get(event, [])
    assert integration_state(defn, paths)[0].state is State.IN_PLACE
    file.write_text(file.read_text().replace('"timeoutSec": 5', '"timeoutSec": 9', 1))
    assert integration_state(defn, paths)[0].state is State.OUTDATED  # ours, changed by someone


def test_gemini_hooks_have_ms_timeouts_names_regex_matcher_and_switch(env: tuple[Path, Paths]) -> None:
    home, paths = env
    install_agent(definitions()["gemini-cli"], paths)
    settings = _load(home / SETTINGS["gemini-cli"])
    assert settings["hooksConfig"]["enabled"] is True
    assert settings["hooksConfig"]["notifications"] is False  # their key, untouched
    groups = settings["hooks"]["AfterTool"]
    [ours] = [g for g in groups if g["hooks"][0].get("name") == "agent-collector-AfterTool"]
    assert ours["matcher"] == ".*" and ours["hooks"][0]["timeout"] == 5000


@pytest.mark.parametrize("agent", AGENTS)
def test_install_twice_is_install_once(env: tuple[Path, Paths], agent: str) -> None:
    home, paths = env
    defn = definitions()[agent]
    install_agent(defn, paths)
    once = snapshot(home)
    second = install_agent(defn, paths)
    assert snapshot(home) == once
    assert {c.action for c in second} <= {Action.UNCHANGED, Action.CONFLICT}


@pytest.mark.parametrize("agent", AGENTS)
def test_uninstall_after_install_is_byte_identical(env: tuple[Path, Paths], agent: str) -> None:
    home, paths = env
    original = agent_snapshot(home, paths)
    defn = definitions()[agent]
    installed = install_agent(defn, paths)
    assert agent_snapshot(home, paths) != original or all(c.action is Action.CONFLICT for c in installed)
    changes = uninstall_agent(defn, paths)
    assert not [c for c in changes if c.failed], changes
    assert agent_snapshot(home, paths) == original
    assert integration_state(defn, paths)[0].state is State.MISSING


def test_all_agents_install_twice_then_uninstall_is_byte_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clear_env(monkeypatch)
    home = make_home(tmp_path, comments=True)
    paths = paths_for(home)
    assert "// my hooks" in (home / ".qwen" / "settings.json").read_text()
    original = agent_snapshot(home, paths)
    defs = definitions()
    for defn in defs.values():
        install_agent(defn, paths)
    once = agent_snapshot(home, paths)
    for rel in (".gemini/settings.json", ".qwen/settings.json"):  # comments kept, hooks added
        text = (home / rel).read_text()
        assert "// my hooks, keep them" in text and "/* foreign ones first */" in text
        assert "agent-collector-hook.sh" in text
    for defn in defs.values():
        install_agent(defn, paths)
    assert agent_snapshot(home, paths) == once
    for defn in defs.values():
        uninstall_agent(defn, paths)
    assert agent_snapshot(home, paths) == original
    assert not list((paths.state_dir / "deploy").glob("*.json"))  # no records left behind


@pytest.mark.parametrize("agent", AGENTS)
def test_dry_run_writes_nothing_anywhere(env: tuple[Path, Paths], agent: str) -> None:
    home, paths = env
    defn = definitions()[agent]
    before = snapshot(home)
    planned = install_agent(defn, paths, dry_run=True)
    assert snapshot(home) == before
    assert all(c.dry_run for c in planned)
    assert any(c.action in (Action.UPDATE, Action.CREATE) for c in planned) or agent == "codex"
    assert "would" in str(planned[0]) or planned[0].action in (Action.CONFLICT, Action.UNCHANGED)
    install_agent(defn, paths)
    installed = snapshot(home)
    uninstall_agent(defn, paths, dry_run=True)
    assert snapshot(home) == installed


@pytest.mark.parametrize("agent", list(SETTINGS))
def test_foreign_edit_between_install_and_uninstall_survives(env: tuple[Path, Paths], agent: str) -> None:
    home, paths = env
    defn = definitions()[agent]
    file = home / SETTINGS[agent]
    original = _load(file)
    install_agent(defn, paths)
    # another program rewrites the file its own way: new key, one more hook, its own formatting
    data = _load(file)
    data["otherTool"] = {"enabled": True, "ünïcode": "✓"}
    first_event = defn.integrations[0]["events"][0]
    data["hooks"][first_event].append({"hooks": [{"type": "command", "command": "other-tool --log"}]})
    file.write_text(json.dumps(data, indent=4, ensure_ascii=False))
    assert integration_state(defn, paths)[0].state in (State.IN_PLACE, State.UNTRUSTED)
    changes = uninstall_agent(defn, paths)
    assert [c.action for c in changes if str(file) == c.file] == [Action.UPDATE]
    after = _load(file)
    assert "agent-collector-hook.sh" not in file.read_text()
    assert after["otherTool"] == {"enabled": True, "ünïcode": "✓"}
    assert "other-tool --log" in hook_commands(after)
    expected = dict(original)
    expected["otherTool"] = after["otherTool"]
    expected_hooks = {k: list(v) for k, v in original["hooks"].items()}
    expected_hooks[first_event] = expected_hooks.get(first_event, []) + [
        {"hooks": [{"type": "command", "command": "other-tool --log"}]}
    ]
    expected["hooks"] = expected_hooks
    if agent == "gemini-cli":
        expected["hooksConfig"] = after["hooksConfig"]  # switches are left on: other hooks may need them
    assert after == expected


def test_foreign_removal_of_our_hooks_is_reported_as_foreign_modified(env: tuple[Path, Paths]) -> None:
    home, paths = env
    defn = definitions()["claude-code"]
    install_agent(defn, paths)
    file = home / SETTINGS["claude-code"]
    data = _load(file)
    for groups in data["hooks"].values():
        groups[:] = [g for g in groups if not any("agent-collector" in h["command"] for h in g["hooks"])]
    file.write_text(json.dumps(data, indent=2))
    [status] = integration_state(defn, paths)
    assert status.state is State.FOREIGN_MODIFIED and status.needs_repair
    assert "watchdog" in status.hint
    install_agent(defn, paths)
    assert integration_state(defn, paths)[0].state is State.IN_PLACE
    uninstall_agent(defn, paths)  # baseline is now the other program's version
    assert _load(file) == data


@pytest.mark.parametrize("agent", list(SETTINGS))
def test_unparseable_file_is_left_alone_with_a_clear_error(env: tuple[Path, Paths], agent: str) -> None:
    home, paths = env
    file = home / SETTINGS[agent]
    broken = b'{\n  "hooks": {\n    "Stop": [\n'
    file.write_bytes(broken)
    changes = install_agent(definitions()[agent], paths)
    [error] = [c for c in changes if c.file == str(file)]
    assert error.action is Action.ERROR
    assert str(file) in str(error) and "not valid JSON" in error.summary and "line 4" in error.summary
    assert file.read_bytes() == broken
    assert integration_state(definitions()[agent], paths)[0].state is State.ERROR
    removal = uninstall_agent(definitions()[agent], paths)
    assert [c.action for c in removal if c.file == str(file)] == [Action.ERROR]
    assert file.read_bytes() == broken


def test_wrong_shape_is_refused(env: tuple[Path, Paths]) -> None:
    home, paths = env
    file = home / SETTINGS["claude-code"]
    file.write_text('{"hooks": []}\n')
    [change] = install_agent(definitions()["claude-code"], paths)
    assert change.action is Action.ERROR and '"hooks" is not an object' in change.summary
    assert file.read_text() == '{"hooks": []}\n'


def test_codex_notify_conflict_is_reported_not_clobbered(env: tuple[Path, Paths]) -> None:
    home, paths = env
    config = home / ".codex" / "config.toml"
    before = config.read_bytes()
    changes = install_agent(definitions()["codex"], paths)
    [conflict] = [c for c in changes if c.file == str(config)]
    assert conflict.action is Action.CONFLICT and "notify is already set" in conflict.summary
    assert config.read_bytes() == before
    states = {s.kind: s for s in integration_state(definitions()["codex"], paths)}
    assert states["toml_notify"].state is State.CONFLICT
    assert tomllib.loads(config.read_text())["notify"][1].endswith("hook_capture.py")


def test_opencode_plugin_is_dropped_next_to_foreign_plugin_and_removed(env: tuple[Path, Paths]) -> None:
    home, paths = env
    plugin_dir = home / ".config" / "opencode" / "plugin"
    capture = (plugin_dir / "capture.js").read_bytes()
    defn = definitions()["opencode"]
    [change] = install_agent(defn, paths)
    assert change.action is Action.CREATE
    ours = (plugin_dir / "agent-collector.js").read_text()
    assert json.dumps(str(paths.spool_dir)) in ours and '"opencode"' in ours
    (plugin_dir / "another.js").write_text("export const X = async () => ({})\n")  # someone else's, later
    uninstall_agent(defn, paths)
    assert not (plugin_dir / "agent-collector.js").exists()
    assert (plugin_dir / "capture.js").read_bytes() == capture and (plugin_dir / "another.js").exists()


def test_opencode_refuses_to_replace_a_foreign_file_with_our_name(env: tuple[Path, Paths]) -> None:
    home, paths = env
    target = home / ".config" / "opencode" / "plugin" / "agent-collector.js"
    target.write_text("// someone else's plugin\n")
    [change] = install_agent(definitions()["opencode"], paths)
    assert change.action is Action.CONFLICT and "not written by agent-collector" in change.summary
    assert target.read_text() == "// someone else's plugin\n"
    assert integration_state(definitions()["opencode"], paths)[0].state is State.CONFLICT


def test_http_plugin_dir_kind_goes_through_the_engine_and_leaves_no_trace(env: tuple[Path, Paths]) -> None:
    """The Claude Code drop-in plugin (collector.deploy.http_plugin) uses the same records and cleanup."""
    home, paths = env
    original = agent_snapshot(home, paths)
    raw = dict(definitions()["claude-code"].raw)
    raw["integrations"] = [{"kind": "http_plugin_dir", "dir": "~/.claude/skills/agent-collector"}]
    defn = definition(raw)
    changes = install_agent(defn, paths)
    assert [c.action for c in changes] == [Action.CREATE, Action.CREATE]
    assert (home / ".claude" / "skills" / "agent-collector" / "hooks" / "hooks.json").exists()
    assert integration_state(defn, paths)[0].state is State.IN_PLACE
    assert {c.action for c in install_agent(defn, paths)} == {Action.UNCHANGED}
    uninstall_agent(defn, paths)
    assert agent_snapshot(home, paths) == original  # .claude/skills/... all gone again
