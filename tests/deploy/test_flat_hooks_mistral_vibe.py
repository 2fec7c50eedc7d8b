"""Mistral Vibe's ~/.vibe/hooks.toml (flat_hooks in TOML, ``type`` naming the event, a ``name`` on every
table: Vibe 3.0.2 ignores a table without one, found with the real CLI): install keeps the user's own
hooks, is idempotent, and uninstall gives the original bytes back."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from support.deploy import clear_env, definitions, paths_for

from collector.deploy import Action, State, install_agent, integration_state, uninstall_agent

USERS = '[[hooks]]\nname = "audit"\ntype = "post_tool"\nmatch = "file_system.*"\ncommand = "./audit.sh"\n'


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    clear_env(monkeypatch)
    (tmp_path / "home" / ".vibe").mkdir(parents=True)
    return tmp_path / "home"


@pytest.mark.parametrize("original", [USERS, None], ids=["beside_the_users_hook", "no_file"])
def test_install_twice_then_uninstall_is_byte_identical(home: Path, original: str | None) -> None:
    paths, defn, file = paths_for(home), definitions()["mistral-vibe"], home / ".vibe" / "hooks.toml"
    if original is not None:
        file.write_text(original)
    install_agent(defn, paths)
    installed = file.read_bytes()
    tables = tomllib.loads(installed.decode())["hooks"]
    ours = [t for t in tables if t.get("name", "").startswith("agent-collector-")]
    assert {t["type"] for t in ours} == {"pre_tool", "post_tool", "post_agent"}
    assert all(t["name"] == f"agent-collector-{t['type']}" and t["timeout"] == 5
               and "agent-collector-hook" in t["command"] for t in ours)
    if original is not None:
        assert tables[0] == {"name": "audit", "type": "post_tool", "match": "file_system.*", "command": "./audit.sh"}
    [again] = install_agent(defn, paths)
    assert again.action is Action.UNCHANGED and file.read_bytes() == installed
    assert integration_state(defn, paths)[0].state is State.IN_PLACE
    uninstall_agent(defn, paths)
    if original is None:
        assert not file.exists() or not tomllib.loads(file.read_text()).get("hooks")
    else:
        assert file.read_text() == original
