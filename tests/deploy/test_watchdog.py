"""The watchdog against real files and real processes: another program rewrites ~/.claude/settings.json
without our hooks; the watchdog puts them back, counts it, respects the user's choice, and stops at the
daily cap when two programs fight over the file."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.deploy import (
    StateSlots,
    choose_settings_variant,
    clear_env,
    definitions,
    make_home,
    paths_for,
    saved,
    watchdog_thread,
)
from support.waits import wait_for

from collector.cli.main import main
from collector.deploy import install_agent
from collector.deploy.choices import set_disabled
from collector.deploy.watchdog import STATE_KEY, Watchdog, legacy_file
from collector.ingest.secret import ingest_port
from collector.paths import Paths

OURS = b"agent-collector-hook.sh"

REWRITER = r"""
import json, sys, time
path, every, duration = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
end = time.monotonic() + duration
n = 0
while True:
    data = json.loads(open(path).read() or "{}")
    for groups in data.get("hooks", {}).values():
        groups[:] = [g for g in groups if not any("agent-collector" in h["command"] for h in g["hooks"])]
    n += 1
    data["otherTool"] = {"writes": n}
    with open(path, "w") as f:  # like most tools: truncate and write in place
        json.dump(data, f, indent=4)
    if time.monotonic() >= end:
        break
    time.sleep(every)
"""


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Paths]:
    clear_env(monkeypatch)
    home = make_home(tmp_path, ["claude-code", "qwen-code"])
    paths = paths_for(home)
    choose_settings_variant(paths)  # the daemon's own definitions must agree with what we install
    for agent in ("claude-code", "qwen-code"):
        install_agent(definitions()[agent], paths)
    return home, paths


def rewrite_once(file: Path) -> None:
    subprocess.run([sys.executable, "-c", REWRITER, str(file), "0", "0"], check=True)


def test_policy_cooldown_conflict_cap_and_next_day(env: tuple[Path, Paths], slots: StateSlots) -> None:
    home, paths = env
    clock = FakeClock()
    dog = Watchdog(definitions(), paths, slots(STATE_KEY), clock=clock, cooldown_s=5, daily_cap=3)
    settings = home / ".claude" / "settings.json"
    assert dog.check(settings) == []  # in place: nothing to do
    rewrite_once(settings)
    assert dog.check(settings) and OURS in settings.read_bytes()
    assert json.loads(settings.read_text())["otherTool"] == {"writes": 1}  # their change is kept
    rewrite_once(settings)
    clock.now += 1
    assert dog.check(settings) == [] and OURS not in settings.read_bytes()  # cooling down
    clock.now += 5
    assert dog.check(settings)
    stats = dog.stats()
    assert stats["repairs_total"] == 2 and stats["conflicts"] == [str(settings)]
    for _ in range(2):
        clock.now += 6
        rewrite_once(settings)
        dog.check(settings)
    assert dog.stats()["repairs_today"] == 3 and OURS not in settings.read_bytes()  # the cap held
    file_stats = dog.stats()["files"][str(settings)]
    assert file_stats["capped"] and "daily cap" in file_stats["note"]
    clock.now += 86_400
    assert dog.check(settings) and OURS in settings.read_bytes()  # a new day, a new budget
    assert saved(paths, STATE_KEY)["repairs_total"] == 4  # in the checkpoint store, as `status` reads it
    assert not legacy_file(paths).exists()


def test_unparseable_rewrite_is_left_alone(env: tuple[Path, Paths], slots: StateSlots) -> None:
    home, paths = env
    dog = Watchdog(definitions(), paths, slots(STATE_KEY), clock=FakeClock())
    settings = home / ".claude" / "settings.json"
    settings.write_text("{ half written")
    assert dog.check(settings) == []
    assert settings.read_text() == "{ half written" and dog.stats()["repairs_total"] == 0


def test_counts_survive_a_restart(env: tuple[Path, Paths]) -> None:
    home, paths = env
    clock = FakeClock()
    settings = home / ".claude" / "settings.json"
    first = StateSlots(paths)
    dog = Watchdog(definitions(), paths, first(STATE_KEY), clock=clock, daily_cap=2)
    for _ in range(2):
        rewrite_once(settings)
        clock.now += 10
        dog.check(settings)
    first.close()  # the daemon stops; the next one opens the store afresh
    second = StateSlots(paths)
    again = Watchdog(definitions(), paths, second(STATE_KEY), clock=clock, daily_cap=2)
    rewrite_once(settings)
    clock.now += 10
    assert again.check(settings) == [] and again.stats()["repairs_today"] == 2
    second.close()


def test_the_watchdog_json_of_an_older_version_moves_into_the_store(env: tuple[Path, Paths]) -> None:
    """An upgrade keeps today's counts (the daily cap holds across it) and leaves no watchdog.json."""
    home, paths = env
    clock = FakeClock()
    settings = home / ".claude" / "settings.json"
    today = time.strftime("%Y-%m-%d", time.localtime(clock.now))
    old = {"repairs_total": 7, "files": {str(settings): {"agent": "claude-code", "day": today, "repairs_today": 2,
                                                         "repairs_total": 7, "last_repair_unix": clock.now - 60}}}
    legacy_file(paths).write_text(json.dumps(old))
    slots = StateSlots(paths)
    dog = Watchdog(definitions(), paths, slots(STATE_KEY), clock=clock, daily_cap=2)
    assert not legacy_file(paths).exists()
    assert saved(paths, STATE_KEY) == old  # read once, as it was
    rewrite_once(settings)
    assert dog.check(settings) == [] and dog.stats()["repairs_total"] == 7  # capped by the migrated count
    slots.close()
    legacy_file(paths).write_text(json.dumps({"files": {}}))  # a stale file beside saved counts: the store wins
    slots = StateSlots(paths)
    again = Watchdog(definitions(), paths, slots(STATE_KEY), clock=clock, daily_cap=2)
    assert not legacy_file(paths).exists() and again.stats()["repairs_today"] == 2
    slots.close()


def test_an_unreadable_watchdog_json_goes_and_the_watchdog_starts_afresh(env: tuple[Path, Paths]) -> None:
    _, paths = env
    legacy_file(paths).write_text("{ half written")
    slots = StateSlots(paths)
    dog = Watchdog(definitions(), paths, slots(STATE_KEY), clock=FakeClock())
    assert not legacy_file(paths).exists() and dog.stats()["repairs_total"] == 0
    slots.close()


@pytest.fixture
def running(env: tuple[Path, Paths]) -> Iterator[tuple[Path, Paths, Watchdog]]:
    """The watchdog's run() on an event loop in a thread, as the daemon runs it."""
    home, paths = env
    slots = StateSlots(paths)
    dog = Watchdog(definitions(), paths, slots(STATE_KEY))
    with watchdog_thread(dog):
        yield home, paths, dog
    slots.close()


def test_rewrite_by_another_process_is_restored_within_5s_and_counted(
    running: tuple[Path, Paths, Watchdog], capsys: pytest.CaptureFixture[str]
) -> None:
    home, paths, dog = running
    settings = home / ".claude" / "settings.json"
    rewrite_once(settings)
    wait_for(lambda: OURS in settings.read_bytes(), timeout=5)
    assert json.loads(settings.read_text())["otherTool"] == {"writes": 1}
    wait_for(lambda: dog.stats()["repairs_total"] == 1, timeout=2)
    # saved just after the repair: wait for it, not for luck
    wait_for(lambda: (saved(paths, STATE_KEY) or {}).get("repairs_total") == 1, timeout=2)
    assert main(["status", "--home", str(home), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["watchdog"]["repairs_total"] == 1
    assert status["watchdog"]["last_repair"]["agent"] == "claude-code"
    qwen = home / ".qwen" / "settings.json"
    assert OURS in qwen.read_bytes() and dog.stats()["files"].get(str(qwen), {}).get("repairs_total", 0) == 0


def test_disabled_agent_is_left_alone(running: tuple[Path, Paths, Watchdog]) -> None:
    home, paths, dog = running
    set_disabled(paths, "claude-code", True)
    settings = home / ".claude" / "settings.json"
    rewrite_once(settings)
    qwen = home / ".qwen" / "settings.json"
    rewrite_once(qwen)  # the other agent is still looked after
    wait_for(lambda: OURS in qwen.read_bytes(), timeout=30)
    rounds = dog.rounds
    wait_for(lambda: dog.rounds >= rounds + 4, 60, "the watchdog to look a few times since")
    assert OURS not in settings.read_bytes() and dog.stats()["repairs_total"] == 1


@pytest.mark.slow
def test_two_programs_fighting_for_a_minute_stop_at_the_cap(
    running: tuple[Path, Paths, Watchdog], capsys: pytest.CaptureFixture[str]
) -> None:
    home, paths, dog = running
    settings = home / ".claude" / "settings.json"
    fighter = subprocess.Popen([sys.executable, "-c", REWRITER, str(settings), "0.1", "60"])
    try:
        assert fighter.wait(timeout=90) == 0
    finally:
        if fighter.poll() is None:
            fighter.kill()
    rounds = dog.rounds
    wait_for(lambda: dog.rounds >= rounds + 4, 60, "the watchdog to look a few times since")
    stats = dog.stats()
    assert stats["repairs_today"] == dog.daily_cap == 10
    assert stats["conflicts"] == [str(settings)] and stats["files"][str(settings)]["capped"]
    assert stats["errors"] == 0
    assert OURS not in settings.read_bytes()  # the last word was theirs: we stopped
    assert main(["status", "--home", str(home)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"watchdog: \d+ files watched, 10 repairs today \(cap 10\)", out), out
    assert f"{settings}: daily cap reached, no more repairs today" in out and "{" not in out


def test_the_daemon_runs_the_watchdog(env: tuple[Path, Paths]) -> None:
    """`agent-collector run` starts the watchdog (a daemon part) and stops on SIGTERM."""
    home, paths = env
    environ = {**os.environ, "AGENT_COLLECTOR_INGEST__ENABLED": "false", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "collector", "run", "--home", str(home)]
    daemon = subprocess.Popen(command, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              cwd=Path(__file__).parents[2])
    try:
        settings = home / ".claude" / "settings.json"
        wait_for(lambda: saved(paths, STATE_KEY) is not None, timeout=20)  # the first check ran
        rewrite_once(settings)
        wait_for(lambda: OURS in settings.read_bytes(), timeout=5)
        wait_for(lambda: saved(paths, STATE_KEY)["repairs_total"] == 1, timeout=5)
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            _, err = daemon.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            daemon.kill()  # never leave it behind
            _, err = daemon.communicate()
    assert daemon.returncode == 0, err.decode()[-2000:]
    assert b"put back" in err


def PLUGIN() -> dict[str, Any]:  # noqa: N802 - the definitions with Claude Code's default variant
    return definitions({"claude-code": "plugin"})


@pytest.fixture
def plugin_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Paths, Watchdog]]:
    """Claude Code with its default integration, the drop-in plugin, under a running watchdog."""

    clear_env(monkeypatch)
    home = make_home(tmp_path, ["claude-code"])
    paths = paths_for(home)
    ingest_port(paths, 0, record=True)  # as `agent-collector install` does: the port is chosen once, then kept
    changes = install_agent(PLUGIN()["claude-code"], paths)
    assert not [c for c in changes if c.failed]
    slots = StateSlots(paths)
    dog = Watchdog(PLUGIN(), paths, slots(STATE_KEY), rescan_s=60, cooldown_s=0.2)  # repairs come from file events
    with watchdog_thread(dog):
        yield home, paths, dog
    slots.close()


def test_deleted_plugin_directory_comes_back_whole(plugin_running: tuple[Path, Paths, Watchdog]) -> None:
    """Both plugin files are put back (the manifest is what makes Claude Code load the hooks), and the
    integration reads "in place" only when both are there."""
    import shutil

    from collector.deploy.engine import integration_state
    from collector.deploy.model import State

    home, paths, dog = plugin_running
    root = home / ".claude" / "skills" / "agent-collector"
    manifest, hooks = root / ".claude-plugin" / "plugin.json", root / "hooks" / "hooks.json"
    originals = manifest.read_bytes(), hooks.read_bytes()
    shutil.rmtree(root)
    wait_for(lambda: manifest.exists() and hooks.exists(), timeout=5)
    wait_for(lambda: (manifest.read_bytes(), hooks.read_bytes()) == originals, timeout=2)
    states = [s for s in integration_state(PLUGIN()["claude-code"], paths) if s.kind == "http_plugin_dir"]
    assert [s.state for s in states] == [State.IN_PLACE]
    hooks.unlink()  # one file of two: not in place, and put back too
    wait_for(lambda: hooks.exists(), timeout=5)
    manifest.unlink()  # (that one file missing reads "not in place": the test below, with no watchdog racing)
    wait_for(lambda: manifest.exists() and manifest.read_bytes() == originals[0], timeout=5)
    wait_for(lambda: dog.stats()["repairs_total"] >= 3, timeout=2)  # counted just after the write


@pytest.mark.parametrize("missing", [".claude-plugin/plugin.json", "hooks/hooks.json"])
def test_one_plugin_file_missing_is_not_in_place(
    missing: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from collector.deploy.engine import integration_state
    from collector.deploy.model import State

    clear_env(monkeypatch)
    home = make_home(tmp_path, ["claude-code"])
    paths = paths_for(home)
    install_agent(PLUGIN()["claude-code"], paths)

    def plugin_states() -> list[State]:
        return [s.state for s in integration_state(PLUGIN()["claude-code"], paths) if s.kind == "http_plugin_dir"]

    assert plugin_states() == [State.IN_PLACE]
    (home / ".claude" / "skills" / "agent-collector" / missing).unlink()
    assert plugin_states() != [State.IN_PLACE]


def test_uninstall_after_the_plugin_directory_was_deleted_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from collector.deploy import uninstall_agent

    clear_env(monkeypatch)
    home = make_home(tmp_path, ["claude-code"])
    paths = paths_for(home)
    install_agent(PLUGIN()["claude-code"], paths)
    skills = home / ".claude" / "skills"
    shutil.rmtree(skills / "agent-collector")
    uninstall_agent(PLUGIN()["claude-code"], paths)
    assert not skills.exists()
