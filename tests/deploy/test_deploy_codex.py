"""Codex: `notify` added to config.toml by a one-line edit (never clobbering someone else's), the
hooks' trust state read from [hooks.state], and hooks as a marked TOML block."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from support.deploy import FIXTURES, clear_env, definition, definitions, paths_for

from collector.deploy import Action, State, install_agent, integration_state, uninstall_agent
from collector.deploy.codex_trust import event_label, handler_hash
from collector.deploy.hookcmd import hook_argv, hook_shell
from collector.paths import Paths

REAL_CONFIG = (FIXTURES / "codex" / "home" / ".codex" / "config.toml").read_text()
WITHOUT_NOTIFY = "".join(line for line in REAL_CONFIG.splitlines(True) if not line.startswith("notify ="))


@pytest.fixture
def codex_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Paths]:
    clear_env(monkeypatch)
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    real = FIXTURES / "codex" / "home" / ".codex" / "hooks.json"
    (home / ".codex" / "hooks.json").write_bytes(real.read_bytes())
    return home, paths_for(home)


def _notify_only() -> dict:
    raw = dict(definitions()["codex"].raw)
    raw["integrations"] = [i for i in raw["integrations"] if i["kind"] == "toml_notify"]
    return raw


@pytest.mark.parametrize(
    "name, text",
    [
        ("real config without notify", WITHOUT_NOTIFY),
        ("only tables", '[features]\nhooks = true\n'),
        ("leading comment then table", "# mine\n[tui]\ntheme = \"x\"\n"),
        ("no newline at end", 'model = "gpt-5.5"'),
        ("crlf", 'model = "gpt-5.5"\r\n\r\n[features]\r\nhooks = true\r\n'),
        ("multi-line array before tables", 'model = "m"\nextra = [\n  [1, 2],\n  "]",\n]\n\n[x]\ny = 1\n'),
        ("empty", ""),
    ],
)
def test_notify_added_then_removed_exactly(codex_home: tuple[Path, Paths], name: str, text: str) -> None:
    home, paths = codex_home
    config = home / ".codex" / "config.toml"
    config.write_bytes(text.encode())
    defn = definition(_notify_only())
    [change] = install_agent(defn, paths)
    assert change.action is Action.UPDATE, change
    new = config.read_bytes().decode()
    parsed = tomllib.loads(new)
    assert parsed["notify"] == hook_argv(paths, "codex", "notify")
    assert {k: v for k, v in parsed.items() if k != "notify"} == tomllib.loads(text)
    blank_line_too = name in ("only tables", "leading comment then table")  # notify, then a blank line
    assert len(new.splitlines()) == len(text.splitlines()) + 1 + int(blank_line_too)
    assert integration_state(defn, paths)[0].state is State.IN_PLACE
    uninstall_agent(defn, paths)
    assert config.read_bytes() == text.encode()


def test_notify_removed_structurally_after_a_foreign_edit(codex_home: tuple[Path, Paths]) -> None:
    home, paths = codex_home
    config = home / ".codex" / "config.toml"
    config.write_text(WITHOUT_NOTIFY)
    defn = definition(_notify_only())
    install_agent(defn, paths)
    with config.open("a") as handle:  # e.g. `codex mcp add` appending a table
        handle.write('\n[mcp_servers.docs]\ncommand = "docs-mcp"\n')
    uninstall_agent(defn, paths)
    assert config.read_text() == WITHOUT_NOTIFY + '\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'


def test_notify_file_absent_is_created_and_deleted(codex_home: tuple[Path, Paths]) -> None:
    home, paths = codex_home
    defn = definition(_notify_only())
    [change] = install_agent(defn, paths)
    assert change.action is Action.CREATE
    assert tomllib.loads((home / ".codex" / "config.toml").read_text())["notify"][0] == hook_shell()
    uninstall_agent(defn, paths)
    assert not (home / ".codex" / "config.toml").exists()


def test_foreign_notify_is_a_conflict_and_broken_toml_an_error(codex_home: tuple[Path, Paths]) -> None:
    home, paths = codex_home
    config = home / ".codex" / "config.toml"
    defn = definition(_notify_only())
    config.write_text(REAL_CONFIG)
    [change] = install_agent(defn, paths)
    assert change.action is Action.CONFLICT and config.read_text() == REAL_CONFIG
    config.write_text('model = "x"\n[features\n')
    [change] = install_agent(defn, paths)
    assert change.action is Action.ERROR
    assert "not valid TOML" in change.summary and str(config) in change.summary
    assert config.read_text() == 'model = "x"\n[features\n'


def test_hash_matches_codex_published_reference_vector() -> None:
    command = "bash '/Users/esh2n/.codex/herdr-agent-state.sh' session"
    handler = {"type": "command", "command": command, "timeout": 10}
    assert handler_hash("SessionStart", None, handler) == (
        "sha256:34637d171b45f4595a9a8f510e6091670f0e98e4f14c6581b6a4fd947cc49cd5"
    )
    assert event_label("PostToolUse") == "post_tool_use" and event_label("Interrupt") == "interrupt"


def _trust_block(hooks_file: Path, mutate: str = "") -> str:
    data = json.loads(hooks_file.read_text())
    lines = []
    for event, groups in data["hooks"].items():
        for gi, group in enumerate(groups):
            for hi, handler in enumerate(group["hooks"]):
                if "agent-collector-hook.sh" not in handler["command"]:
                    continue
                digest = handler_hash(event, group.get("matcher"), handler)
                if mutate == "modify" and event == "Stop":
                    digest = "sha256:" + "0" * 64
                lines.append(f'[hooks.state."{hooks_file}:{event_label(event)}:{gi}:{hi}"]')
                lines.append(f'trusted_hash = "{digest}"')
                if mutate == "disable" and event == "PreToolUse":
                    lines.append("enabled = false")
    return "\n".join(lines) + "\n"


def test_trust_state_untrusted_then_trusted_then_modified(codex_home: tuple[Path, Paths]) -> None:
    home, paths = codex_home
    config = home / ".codex" / "config.toml"
    config.write_text(WITHOUT_NOTIFY)
    defn = definitions()["codex"]
    install_agent(defn, paths)
    hooks_state = integration_state(defn, paths)[0]
    assert hooks_state.state is State.UNTRUSTED
    assert "12 of 12 not trusted" in hooks_state.hint and "/hooks" in hooks_state.hint
    hooks_file = home / ".codex" / "hooks.json"
    base = config.read_text()
    config.write_text(base + "\n" + _trust_block(hooks_file))  # what Codex writes when the user trusts
    assert integration_state(defn, paths)[0].state is State.IN_PLACE
    assert "trusts all 12" in integration_state(defn, paths)[0].hint
    config.write_text(base + "\n" + _trust_block(hooks_file, "modify"))
    state = integration_state(defn, paths)[0]
    assert state.state is State.UNTRUSTED and "1 changed since trusted" in state.hint
    config.write_text(base + "\n" + _trust_block(hooks_file, "disable"))
    state = integration_state(defn, paths)[0]
    assert state.state is State.UNTRUSTED and "disabled in /hooks" in state.hint
    uninstall_agent(defn, paths)  # config.toml changed (trust added): only our notify line goes
    left = tomllib.loads(config.read_text())
    assert "notify" not in left and left["hooks"]["state"]


def _toml_hooks(extra: dict | None = None) -> dict:
    raw = dict(definitions()["codex"].raw)
    spec = {**raw["integrations"][0], "file": "${CODEX_HOME:-~/.codex}/config.toml", "format": "toml"}
    spec.update(extra or {})
    spec.pop("trust")
    return {**raw, "integrations": [spec]}


def test_hooks_as_a_marked_toml_block(codex_home: tuple[Path, Paths]) -> None:
    home, paths = codex_home
    config = home / ".codex" / "config.toml"
    config.write_text(WITHOUT_NOTIFY)
    defn = definition(_toml_hooks())
    install_agent(defn, paths)
    data = tomllib.loads(config.read_text())
    assert data["hooks"]["PreToolUse"][0]["matcher"] == "*"
    assert "agent-collector-hook.sh" in data["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert config.read_text().startswith(WITHOUT_NOTIFY)
    assert integration_state(defn, paths)[0].state is State.IN_PLACE
    install_agent(defn, paths)
    assert config.read_text().count("agent-collector hooks (managed") == 1
    with config.open("a") as handle:
        handle.write("\n[tui]\nx = 1\n")
    uninstall_agent(defn, paths)
    assert config.read_text() == WITHOUT_NOTIFY + "\n[tui]\nx = 1\n"


def test_toml_block_refused_when_hooks_are_defined_inline(codex_home: tuple[Path, Paths]) -> None:
    home, paths = codex_home
    config = home / ".codex" / "config.toml"
    text = 'model = "m"\n[hooks]\nStop = [{hooks = [{type = "command", command = "mine"}]}]\n'
    config.write_text(text)
    [change] = install_agent(definition(_toml_hooks()), paths)
    assert change.action is Action.ERROR and "inline" in change.summary
    assert config.read_text() == text
