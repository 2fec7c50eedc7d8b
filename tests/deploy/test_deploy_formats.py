"""Odd but real-world settings files: tabs, CRLF, BOM, no trailing newline, unicode, key order,
comments and trailing commas (JSONC), one-line files, empty and absent files, symlinks, file modes.
Every case: install puts our hooks in and keeps every other byte; uninstall gives the original back;
and stripping our entries structurally (no record) is the exact inverse too."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.deploy import clear_env, definition, paths_for

from collector.deploy import Action, State, install_agent, integration_state, uninstall_agent
from collector.deploy.jsonc import JsoncError, parse
from collector.deploy.settings_hooks import SettingsHooksJson

EVENTS = ["SessionStart", "PreToolUse", "Stop"]


def _defn(fmt: str = "jsonc", **extra: object) -> dict:
    spec = {"kind": "settings_hooks", "file": "~/.agent/settings.json", "format": fmt, "events": EVENTS,
            "matcher_events": ["PreToolUse"], "matcher": "*", "timeout": 5, **extra}
    return {"id": "test-agent", "name": "Test", "parser": "test", "detect": {"paths": ["~/.agent"]},
            "integrations": [spec], "sources": [{"kind": "spool"}]}


CASES = {
    "tabs": '{\n\t"model": "x",\n\t"hooks": {\n\t\t"Stop": [\n'
            '\t\t\t{"hooks": [{"type": "command", "command": "theirs"}]}\n'
            "\t\t]\n\t}\n}\n",
    "crlf": '{\r\n  "b": 1,\r\n  "a": {\r\n    "z": [1, 2]\r\n  }\r\n}\r\n',
    "no_trailing_newline": '{\n    "permissions": {"allow": ["Bash(ls)"]}\n}',
    "unicode_and_key_order": '{\n  "zeta": "ünïcødé ✓ 中文",\n  "alpha": {"emoji": "🚀"},\n'
                             '  "hooks": {}\n}\n',
    "bom": '\ufeff{\n  "x": true\n}\n',
    "one_line": '{"model": "m", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", '
                '"command": "lint"}]}]}}',
    "empty_object": "{}\n",
    "comments": '// user settings\n{\n  /* theme */ "theme": "dark", // trailing\n  "hooks": {\n'
                '    // their stop hook\n'
                '    "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],\n'
                "  },\n}\n",
    "comment_inside_empty_hooks": '{\n  "hooks": {\n    // nothing yet\n  }\n}\n',
    "trailing_commas": '{\n  "a": [1, 2,],\n  "hooks": {"Stop": [],},\n}\n',
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    clear_env(monkeypatch)
    (tmp_path / "home" / ".agent").mkdir(parents=True)
    return tmp_path / "home"


@pytest.mark.parametrize("name", sorted(CASES))
def test_odd_file_round_trip(home: Path, name: str) -> None:
    paths = paths_for(home)
    file = home / ".agent" / "settings.json"
    original = CASES[name].encode("utf-8")
    file.write_bytes(original)
    defn = definition(_defn())
    [change] = install_agent(defn, paths)
    assert change.action is Action.UPDATE, change
    text = file.read_bytes().decode("utf-8")  # not read_text: it would turn CRLF into LF
    data = parse(text).value()
    for event in EVENTS:
        commands = [h["command"] for g in data["hooks"][event] for h in g["hooks"]]
        assert any("agent-collector-hook.sh" in c for c in commands)
    for line in CASES[name].splitlines():  # comments and every original line are still there, verbatim
        if "//" in line or "/*" in line:
            assert line.strip() in text
    if name == "crlf":
        assert "\n" not in text.replace("\r\n", "")
    if name == "tabs":
        assert "\n\t\t\t{\n\t\t\t\t\"hooks\"" in text and "  " not in text.replace("\t", "")
    if name == "one_line":
        assert "\n" not in text
    if name == "bom":
        assert text.startswith("\ufeff")
    assert integration_state(defn, paths)[0].state is State.IN_PLACE
    uninstall_agent(defn, paths)
    assert file.read_bytes() == original


# Cases whose original already holds an *empty* container we then fill (`"hooks": {}`, `"Stop": []`):
# without a record, an emptied container cannot be told from one we created, so structural removal
# drops it (same meaning, different bytes). With a record, uninstall restores those bytes exactly.
HAD_EMPTY_CONTAINER = {"unicode_and_key_order", "comment_inside_empty_hooks", "trailing_commas"}


@pytest.mark.parametrize("name", sorted(set(CASES) - HAD_EMPTY_CONTAINER))
def test_structural_strip_is_the_exact_inverse(home: Path, name: str) -> None:
    paths = paths_for(home)
    edit = SettingsHooksJson("test-agent", _defn()["integrations"][0], paths, None)
    original = CASES[name].encode("utf-8")
    installed = edit.apply(original)
    assert installed != original
    assert edit.strip(installed) == original
    assert edit.strip(original) == original  # nothing of ours: not a byte changes


@pytest.mark.parametrize("name", sorted(HAD_EMPTY_CONTAINER))
def test_structural_strip_drops_emptied_containers_and_stays_valid(home: Path, name: str) -> None:
    paths = paths_for(home)
    edit = SettingsHooksJson("test-agent", _defn()["integrations"][0], paths, None)
    stripped = edit.strip(edit.apply(CASES[name].encode()))
    assert stripped is not None
    expected = parse(CASES[name]).value()
    hooks = {k: v for k, v in expected.pop("hooks").items() if v}
    if hooks:
        expected["hooks"] = hooks
    assert parse(stripped.decode()).value() == expected
    assert "agent-collector" not in stripped.decode()


def test_strict_json_file_with_comments_is_refused(home: Path) -> None:
    paths = paths_for(home)
    file = home / ".agent" / "settings.json"
    file.write_text(CASES["comments"])
    [change] = install_agent(definition(_defn("json")), paths)
    assert change.action is Action.ERROR and "comments are not allowed" in change.summary
    assert file.read_text() == CASES["comments"]


def test_empty_file_gets_hooks_and_is_restored_empty(home: Path) -> None:
    paths = paths_for(home)
    file = home / ".agent" / "settings.json"
    file.write_bytes(b"")
    defn = definition(_defn("json"))
    install_agent(defn, paths)
    assert set(json.loads(file.read_bytes())["hooks"]) == set(EVENTS)
    uninstall_agent(defn, paths)
    assert file.read_bytes() == b""


def test_absent_file_and_folder_are_created_then_removed(home: Path) -> None:
    paths = paths_for(home)
    defn = definition({**_defn("json"), "integrations": [{**_defn("json")["integrations"][0],
                                                          "file": "~/.agent/deeper/nested/settings.json"}]})
    [change] = install_agent(defn, paths)
    assert change.action is Action.CREATE and "created" in change.summary
    file = home / ".agent" / "deeper" / "nested" / "settings.json"
    assert json.loads(file.read_bytes())["hooks"]["Stop"]
    uninstall_agent(defn, paths)
    assert not (home / ".agent" / "deeper").exists()
    assert (home / ".agent").is_dir()  # it existed before


def test_symlinked_settings_are_edited_through_the_link(home: Path, tmp_path: Path) -> None:
    paths = paths_for(home)
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "settings.json"
    real.write_text('{"x": 1}\n')
    link = home / ".agent" / "settings.json"
    link.symlink_to(real)
    defn = definition(_defn("json"))
    install_agent(defn, paths)
    assert link.is_symlink() and "agent-collector-hook.sh" in real.read_text()
    uninstall_agent(defn, paths)
    assert link.is_symlink() and real.read_text() == '{"x": 1}\n'


def test_file_mode_is_kept(home: Path) -> None:
    paths = paths_for(home)
    file = home / ".agent" / "settings.json"
    file.write_text("{}\n")
    os.chmod(file, 0o600)
    defn = definition(_defn("json"))
    install_agent(defn, paths)
    assert file.stat().st_mode & 0o777 == 0o600
    uninstall_agent(defn, paths)
    assert file.stat().st_mode & 0o777 == 0o600


def test_mixed_group_loses_only_our_hook(home: Path) -> None:
    """Someone moved our hook into their own group: structural removal takes only ours out."""
    paths = paths_for(home)
    file = home / ".agent" / "settings.json"
    file.write_text("{}\n")
    defn = definition(_defn("json"))
    install_agent(defn, paths)
    data = json.loads(file.read_text())
    ours = data["hooks"]["Stop"][0]["hooks"][0]
    data["hooks"]["Stop"] = [{"hooks": [{"type": "command", "command": "theirs"}, ours]}]
    file.write_text(json.dumps(data))
    uninstall_agent(defn, paths)
    theirs = {"type": "command", "command": "theirs"}
    assert json.loads(file.read_text()) == {"hooks": {"Stop": [{"hooks": [theirs]}]}}


def test_outdated_hook_is_replaced_not_duplicated(home: Path) -> None:
    paths = paths_for(home)
    file = home / ".agent" / "settings.json"
    file.write_text("{}\n")
    install_agent(definition(_defn("json")), paths)
    newer = definition(_defn("json", timeout=9))
    assert integration_state(newer, paths)[0].state is State.OUTDATED
    install_agent(newer, paths)
    data = json.loads(file.read_text())
    assert [h["timeout"] for g in data["hooks"]["Stop"] for h in g["hooks"]] == [9]
    uninstall_agent(newer, paths)
    assert file.read_text() == "{}\n"


def test_parse_errors_say_where() -> None:
    with pytest.raises(JsoncError, match="line 2 column 8"):
        parse('{\n  "a": tru\n}')
    with pytest.raises(JsoncError, match="unterminated string"):
        parse('{"a": "x')
    with pytest.raises(JsoncError, match="trailing comma"):
        parse('{"a": 1,}', comments=False)
