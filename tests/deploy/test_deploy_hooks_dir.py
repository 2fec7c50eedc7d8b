"""The hooks_dir integration kind (Cline's ~/.cline/hooks/<Event>): one executable wrapper per event, ours by
its marker, that answers the agent, runs the real spool hook script and fails open; install is idempotent,
uninstall leaves the folder as it was, the user's own hooks are never touched, a removed wrapper is put back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.deploy import StateSlots, agent_snapshot, clear_env, definitions, paths_for, watchdog_thread
from support.waits import wait_for

from collector.deploy import Action, State, install_agent, integration_state, uninstall_agent
from collector.deploy.engine import repair_file
from collector.deploy.watchdog import STATE_KEY, Watchdog
from collector.paths import Paths

AGENT = "cline"
EVENTS = ["TaskStart", "TaskResume", "TaskCancel", "TaskComplete", "TaskError", "PreToolUse", "PostToolUse",
          "UserPromptSubmit", "SessionShutdown"]
PROVIDERS = '{\n  "version": 1,\n  "lastUsedProvider": "openai-compatible"\n}\n'


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Paths]:
    clear_env(monkeypatch)
    monkeypatch.delenv("CLINE_DIR", raising=False)
    home = tmp_path / "home"
    settings = home / ".cline" / "data" / "settings"
    settings.mkdir(parents=True)
    (settings / "providers.json").write_text(PROVIDERS)
    return home, paths_for(home)


def run_hook(path: Path, payload: str) -> subprocess.CompletedProcess[str]:
    """As Cline runs a hook file: the interpreter of its shebang line, the event's JSON on stdin."""
    shebang = path.read_text().splitlines()[0][2:].split()
    return subprocess.run([*shebang, str(path)], input=payload, capture_output=True, text=True, timeout=30,
                          check=False, env={"PATH": os.environ["PATH"], "HOME": str(path.parents[2])})


def test_one_executable_per_event_answers_and_spools(env: tuple[Path, Paths]) -> None:
    home, paths = env
    changes = install_agent(definitions()[AGENT], paths)
    assert [c.action for c in changes] == [Action.CREATE] * len(EVENTS)
    hooks = home / ".cline" / "hooks"
    assert sorted(p.name for p in hooks.iterdir()) == sorted(EVENTS)
    for path in hooks.iterdir():
        assert path.stat().st_mode & 0o777 == 0o755 and "agent-collector:managed" in path.read_text()
    payload = {"taskId": "conv_1", "sessionContext": {"rootSessionId": "s1"}, "hookName": "tool_call",
               "tool_call": {"id": "call_1", "name": "run_commands", "input": {"commands": ["echo hi"]}}}
    result = run_hook(hooks / "PreToolUse", json.dumps(payload, indent=2))
    assert (result.returncode, result.stdout, result.stderr) == (0, '{"cancel": false}\n', "")
    (day,) = (paths.spool_dir / AGENT).glob("cline-*.jsonl")
    (line,) = [json.loads(x) for x in day.read_text().splitlines()]
    assert (line["agent"], line["event"], line["payload"]) == (AGENT, "PreToolUse", payload)


def test_a_wrapper_whose_hook_script_is_gone_still_answers_and_exits_0(
    env: tuple[Path, Paths], tmp_path: Path
) -> None:
    home, paths = env
    script = tmp_path / "gone" / "agent-collector-hook.sh"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\nexit 0\n")
    install_agent(definitions()[AGENT], paths, hook_script=script)
    script.unlink()
    result = run_hook(home / ".cline" / "hooks" / "PostToolUse", '{"hookName": "tool_result"}')
    assert (result.returncode, result.stdout, result.stderr) == (0, '{"cancel": false}\n', "")
    assert not paths.spool_dir.exists()


def test_install_twice_then_uninstall_leaves_the_home_as_it_was(env: tuple[Path, Paths]) -> None:
    home, paths = env
    before = agent_snapshot(home, paths)
    defn = definitions()[AGENT]
    install_agent(defn, paths)
    installed = agent_snapshot(home, paths)
    assert {c.action for c in install_agent(defn, paths)} == {Action.UNCHANGED}
    assert agent_snapshot(home, paths) == installed
    assert {s.state for s in integration_state(defn, paths)} == {State.IN_PLACE}
    uninstall_agent(defn, paths)
    assert agent_snapshot(home, paths) == before  # ~/.cline/hooks, which we created, is gone too


def test_the_users_own_hooks_are_never_touched(env: tuple[Path, Paths]) -> None:
    home, paths = env
    hooks = home / ".cline" / "hooks"
    hooks.mkdir()
    (hooks / "TaskStart.sh").write_text("#!/bin/sh\necho mine\n")  # same event, another name: both run
    (hooks / "PreToolUse").write_text("#!/bin/sh\necho '{\"cancel\": true}'\n")  # our name: left alone
    before = agent_snapshot(home, paths)
    defn = definitions()[AGENT]
    changes = {Path(c.file).name: c for c in install_agent(defn, paths)}
    # all or nothing: one event file is the user's, so none of ours is written (never half-hooked)
    assert list(changes) == ["PreToolUse"] and changes["PreToolUse"].action is Action.CONFLICT
    assert "not written by agent-collector" in changes["PreToolUse"].summary
    assert "none of that integration's 9 files was written" in changes["PreToolUse"].summary
    assert sorted(p.name for p in hooks.iterdir()) == ["PreToolUse", "TaskStart.sh"]
    assert (hooks / "PreToolUse").read_text() == "#!/bin/sh\necho '{\"cancel\": true}'\n"
    assert integration_state(defn, paths)[0].state is State.CONFLICT
    uninstall_agent(defn, paths)
    assert agent_snapshot(home, paths) == before


def test_a_removed_wrapper_is_put_back_by_the_repair(env: tuple[Path, Paths]) -> None:
    home, paths = env
    defn = definitions()[AGENT]
    install_agent(defn, paths)
    target = home / ".cline" / "hooks" / "TaskComplete"
    content = target.read_bytes()
    target.unlink()
    assert integration_state(defn, paths)[0].state is State.FOREIGN_MODIFIED
    changes = repair_file(defn, paths, target)
    assert Action.CREATE in {c.action for c in changes}
    assert target.read_bytes() == content and target.stat().st_mode & 0o777 == 0o755
    assert integration_state(defn, paths)[0].state is State.IN_PLACE


@pytest.fixture
def watched(env: tuple[Path, Paths]) -> Iterator[tuple[Path, Paths, Watchdog]]:
    """Cline's hooks installed, the watchdog's run() on an event loop in a thread, as the daemon runs it."""
    home, paths = env
    install_agent(definitions()[AGENT], paths)
    slots = StateSlots(paths)
    dog = Watchdog(definitions(), paths, slots(STATE_KEY), rescan_s=60, cooldown_s=0.2)
    with watchdog_thread(dog):
        yield home, paths, dog
    slots.close()


def test_the_watchdog_puts_a_deleted_hooks_folder_back_and_leaves_a_foreign_file_alone(
    watched: tuple[Path, Paths, Watchdog],
) -> None:
    home, paths, dog = watched
    hooks = home / ".cline" / "hooks"
    originals = {p.name: p.read_bytes() for p in hooks.iterdir()}
    shutil.rmtree(hooks)  # a clean-up script, say
    def settled() -> bool:  # the watchdog writes each file atomically: a hidden temp file may come and go
        try:
            return hooks.is_dir() and {p.name: p.read_bytes() for p in hooks.iterdir()
                                       if not p.name.startswith(".")} == originals
        except FileNotFoundError:
            return False

    wait_for(settled, 10)
    assert all(p.stat().st_mode & 0o777 == 0o755 for p in hooks.iterdir())
    rounds = dog.rounds
    (hooks / "PreToolUse").write_text("#!/bin/sh\necho '{}'\n")  # the user puts their own hook there
    wait_for(lambda: dog.rounds >= rounds + 4, 60, "the watchdog to look a few times since")
    assert (hooks / "PreToolUse").read_text() == "#!/bin/sh\necho '{}'\n", "someone else's file is never replaced"
    assert dog.stats()["repairs_total"] >= 1
