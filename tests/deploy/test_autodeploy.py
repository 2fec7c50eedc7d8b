"""Auto-deploy: an agent installed after agent-collector gets its integration from the daemon (detection
on file events and every rescan), once; not when only an empty folder appeared, not when the user
disabled the agent or auto-deploy, and not again after the user uninstalled it."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.deploy import FIXTURES, StateSlots, clear_env, definitions, paths_for, saved
from support.waits import wait_for

from collector.cli.main import main
from collector.config import load_config
from collector.deploy import State, integration_state, uninstall_agent
from collector.deploy.autodeploy import STATE_KEY, AutoDeployer, legacy_file
from collector.deploy.choices import set_disabled
from collector.paths import Paths

OURS = b"agent-collector-hook.sh"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Paths]:
    clear_env(monkeypatch)
    monkeypatch.setenv("PATH", str(tmp_path / "no-agents-on-path"))  # detection by files only
    home = tmp_path / "home"
    home.mkdir()
    return home, paths_for(home)


def install_claude_later(home: Path) -> Path:
    """Claude Code's own config as its CLI left it (the deploy fixture), appearing after the collector."""
    shutil.copytree(FIXTURES / "claude-code" / "home", home, dirs_exist_ok=True)
    return home / ".claude" / "settings.json"


def test_an_agent_installed_later_is_deployed_once(env: tuple[Path, Paths]) -> None:
    home, paths = env
    first = StateSlots(paths)
    deployer = AutoDeployer(definitions(), paths, first(STATE_KEY))
    assert deployer.scan() == []
    (home / ".claude").mkdir()  # some other program made the folder: no agent yet
    assert deployer.scan() == []
    settings = install_claude_later(home)
    assert deployer.scan() == ["claude-code"]
    assert OURS in settings.read_bytes()
    assert integration_state(definitions()["claude-code"], paths)[0].state is State.IN_PLACE
    report = saved(paths, STATE_KEY)  # in the checkpoint store, as `status` reads it
    assert [d["agent"] for d in report["deployed"]] == ["claude-code"] and report["deployed"][0]["ok"]
    assert deployer.scan() == []  # once
    first.close()
    uninstall_agent(definitions()["claude-code"], paths)
    second = StateSlots(paths)
    again = AutoDeployer(definitions(), paths, second(STATE_KEY))  # a restarted daemon remembers: the user took it out
    assert again.scan() == [] and OURS not in settings.read_bytes()
    second.close()


def test_the_autodeploy_json_of_an_older_version_moves_into_the_store(env: tuple[Path, Paths],
                                                                      slots: StateSlots) -> None:
    """What an older version saw installed (and the user uninstalled since) stays known after the upgrade."""
    home, paths = env
    settings = install_claude_later(home)
    before = settings.read_bytes()
    legacy_file(paths).parent.mkdir(parents=True, exist_ok=True)
    legacy_file(paths).write_text(json.dumps({"known": {"claude-code": 1.0}, "deployed": [], "scans": 3}))
    deployer = AutoDeployer(definitions(), paths, slots(STATE_KEY))
    assert not legacy_file(paths).exists() and deployer.state.known == {"claude-code": 1.0}
    assert deployer.scan() == [] and settings.read_bytes() == before
    assert saved(paths, STATE_KEY)["scans"] == 4


def test_an_agent_already_deployed_by_install_is_not_touched(env: tuple[Path, Paths], slots: StateSlots) -> None:
    home, paths = env
    from collector.deploy import install_agent

    settings = install_claude_later(home)
    install_agent(definitions()["claude-code"], paths)
    before = settings.read_bytes()
    assert AutoDeployer(definitions(), paths, slots(STATE_KEY)).scan() == []
    assert settings.read_bytes() == before


def test_a_disabled_agent_is_not_deployed(env: tuple[Path, Paths], slots: StateSlots,
                                          caplog: pytest.LogCaptureFixture) -> None:
    home, paths = env
    set_disabled(paths, "claude-code", True)
    settings = install_claude_later(home)
    before = settings.read_bytes()
    deployer = AutoDeployer(definitions(), paths, slots(STATE_KEY))
    with caplog.at_level("INFO"):
        assert deployer.scan() == [] and deployer.scan() == []
    assert settings.read_bytes() == before
    assert sum("disabled by you" in r.getMessage() for r in caplog.records) == 1  # said once
    set_disabled(paths, "claude-code", False)
    assert deployer.scan() == ["claude-code"]  # enabled again while still new: deployed


def test_auto_deploy_can_be_switched_off(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[deploy]\nauto = false\nrescan_s = 5\n")
    loaded = load_config(config, env={})
    assert loaded.deploy.auto is False and loaded.deploy.rescan_s == 5.0
    assert load_config(tmp_path / "none.toml", env={}).deploy.auto is True


@pytest.fixture
def running(env: tuple[Path, Paths], slots: StateSlots) -> Iterator[tuple[Path, Paths, AutoDeployer]]:
    home, paths = env
    deployer = AutoDeployer(definitions(), paths, slots(STATE_KEY), rescan_s=3600)  # only file events trigger it
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(deployer.run(),), daemon=True)
    thread.start()
    wait_for(lambda: saved(paths, STATE_KEY) is not None, timeout=10)  # the first detection ran
    wait_for(lambda: deployer.rounds >= 1, 60, "the watches to be up")  # the first round comes once they are
    yield home, paths, deployer
    loop.call_soon_threadsafe(deployer.stop)
    thread.join(timeout=10)
    assert not thread.is_alive()
    loop.close()


def test_a_file_event_triggers_detection(
    running: tuple[Path, Paths, AutoDeployer], capsys: pytest.CaptureFixture[str]
) -> None:
    home, paths, _ = running
    settings = install_claude_later(home)
    wait_for(lambda: OURS in settings.read_bytes(), timeout=10)
    # the deploy is saved once the scan that made it ends: wait for it, not for luck
    wait_for(lambda: bool((saved(paths, STATE_KEY) or {}).get("deployed")), timeout=5)
    assert main(["status", "--home", str(home), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert [d["agent"] for d in status["autodeploy"]["deployed"]] == ["claude-code"]
    assert main(["status", "--home", str(home)]) == 0
    assert "claude-code: deployed" in capsys.readouterr().out
