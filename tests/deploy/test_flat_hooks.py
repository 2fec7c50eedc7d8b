"""The flat hook layout (flat_hooks): Cursor's hooks.json (JSON) and Kimi CLI's config.toml ([[hooks]]).
Install keeps every foreign byte and is idempotent, uninstall gives the original bytes back, and a hostile
file (wrong types, huge, not JSON, nested too deep) is refused with a clear error and left as it was."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from support.deploy import StateSlots, clear_env, paths_for, watchdog_thread
from support.deploy import definitions as shipped
from support.waits import wait_for

from collector.definitions import AgentDefinition
from collector.deploy import Action, State, install_agent, integration_state, uninstall_agent
from collector.deploy.file_edit import MAX_CONFIG_BYTES
from collector.deploy.watchdog import STATE_KEY, Watchdog

OURS = b"agent-collector-hook.sh"
CURSOR = '{\n  "version": 1,\n  "hooks": {\n    "stop": [{"command": "./audit.sh"}]\n  }\n}\n'
KIMI = ('default_model = "m"\n\n[[hooks]]\nevent = "Stop"\ncommand = "notify-send done"\n\n'
        '[providers.p]\ntype = "kimi"\n')


# Cursor's layout (~/.cursor/hooks.json, {"version": 1, "hooks": {"<event>": [{"command", "timeout"}]}}, as
# documented at cursor.com/docs/agent/hooks): a definition kept with the tests, not shipped, until a Cursor
# parser has a fixture whose every field cites its source.
CURSOR_DEFINITION = Path(__file__).parents[1] / "fixtures" / "flat_hooks" / "cursor-agent.json"


def definitions() -> dict[str, AgentDefinition]:
    agents = shipped()
    agents["cursor-agent"] = AgentDefinition("cursor-agent", json.loads(CURSOR_DEFINITION.read_text()), ())
    return agents


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    clear_env(monkeypatch)
    for d in (".cursor", ".kimi"):
        (tmp_path / "home" / d).mkdir(parents=True)
    return tmp_path / "home"


@pytest.mark.parametrize(("agent", "rel", "original"), [
    ("cursor-agent", ".cursor/hooks.json", CURSOR), ("kimi", ".kimi/config.toml", KIMI)])
def test_install_twice_then_uninstall_is_byte_identical(home: Path, agent: str, rel: str, original: str) -> None:
    paths, defn, file = paths_for(home), definitions()[agent], home / rel
    file.write_text(original)
    [first] = install_agent(defn, paths)
    assert first.action is Action.UPDATE
    installed = file.read_bytes()
    assert installed.count(OURS) == len(defn.integrations[0]["events"])
    [second] = install_agent(defn, paths)
    assert second.action is Action.UNCHANGED and file.read_bytes() == installed
    assert integration_state(defn, paths)[0].state is State.IN_PLACE
    if agent == "cursor-agent":
        data = json.loads(installed)
        assert data["version"] == 1 and data["hooks"]["stop"][0] == {"command": "./audit.sh"}
        ours = [h for hooks in data["hooks"].values() for h in hooks if h != {"command": "./audit.sh"}]
        assert ours and all(list(h) == ["command", "timeout"] and h["timeout"] == 30 for h in ours)
    else:
        tables = tomllib.loads(installed.decode())["hooks"]
        assert tables[0] == {"event": "Stop", "command": "notify-send done"}
        assert {t["event"] for t in tables[1:]} == set(defn.integrations[0]["events"])
    uninstall_agent(defn, paths)
    assert file.read_text() == original


def test_absent_hooks_json_is_created_with_version_and_removed(home: Path) -> None:
    paths, defn, file = paths_for(home), definitions()["cursor-agent"], home / ".cursor" / "hooks.json"
    install_agent(defn, paths)
    assert json.loads(file.read_text())["version"] == 1
    uninstall_agent(defn, paths)
    assert not file.exists()


def test_a_foreign_version_is_never_changed(home: Path) -> None:
    paths, defn, file = paths_for(home), definitions()["cursor-agent"], home / ".cursor" / "hooks.json"
    file.write_text('{"version": 2}')
    install_agent(defn, paths)
    assert json.loads(file.read_text())["version"] == 2


HOSTILE = {
    "not_json": b'{"version": 1, "hooks": {',
    "top_level_array": b"[1, 2]",
    "hooks_a_list": b'{"version": 1, "hooks": [{"command": "x"}]}',
    "event_a_string": b'{"version": 1, "hooks": {"stop": "x"}}',
    "too_deep": b"[" * 100_000 + b"]" * 100_000,
    "huge": b'{"pad": "' + b"x" * (MAX_CONFIG_BYTES + 1) + b'"}',
    "not_utf8": b'{"a": "\xff"}',
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_hooks_json_is_refused_and_left_untouched(home: Path, name: str) -> None:
    paths, defn, file = paths_for(home), definitions()["cursor-agent"], home / ".cursor" / "hooks.json"
    file.write_bytes(HOSTILE[name])
    [change] = install_agent(defn, paths)
    assert change.action is Action.ERROR and "left untouched" in change.summary, change
    assert file.read_bytes() == HOSTILE[name]
    assert integration_state(defn, paths)[0].state is not State.IN_PLACE


def test_inline_hooks_in_kimi_toml_are_refused(home: Path) -> None:
    paths, defn, file = paths_for(home), definitions()["kimi"], home / ".kimi" / "config.toml"
    file.write_text('hooks = [{event = "Stop", command = "x"}]\n')
    [change] = install_agent(defn, paths)
    assert change.action is Action.ERROR and "left untouched" in change.summary
    assert file.read_text() == 'hooks = [{event = "Stop", command = "x"}]\n'


@pytest.mark.parametrize(("agent", "rel", "original"), [
    ("cursor-agent", ".cursor/hooks.json", CURSOR), ("kimi", ".kimi/config.toml", KIMI)])
def test_the_watchdog_puts_a_flat_layout_back(home: Path, agent: str, rel: str, original: str) -> None:
    """Another program writes the file back without our hooks (its own edit kept): the watchdog restores
    ours, keeps that edit, and counts one repair."""
    target = home / rel
    target.write_text(original)
    paths = paths_for(home)
    agents = definitions()
    install_agent(agents[agent], paths)
    assert OURS in target.read_bytes()
    slots = StateSlots(paths)
    dog = Watchdog({agent: agents[agent]}, paths, slots(STATE_KEY))
    try:
        with watchdog_thread(dog):
            edited = original.replace("notify-send done", "notify-send finished").replace("./audit.sh", "./audit2.sh")
            target.write_text(edited)  # the user's own hook changed, ours gone: as another editor would
            wait_for(lambda: OURS in target.read_bytes(), timeout=10)
            wait_for(lambda: dog.stats()["repairs_total"] == 1, timeout=5)
        own = "notify-send finished" if agent == "kimi" else "./audit2.sh"
        assert own in target.read_text()
        assert integration_state(agents[agent], paths)[0].state is State.IN_PLACE
        uninstall_agent(agents[agent], paths)
        assert target.read_text() == edited  # and ours go again, byte for byte
    finally:
        slots.close()
