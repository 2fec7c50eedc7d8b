"""`agent-collector attributes set|unset|list`: the live attribute file, edited atomically, refused names
named; the running daemon stamps a change on the entries it processes next, without a restart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import FIXTURES, ROOT, read_output
from support.processes import stop_gently
from support.waits import wait_for

QWEN_SPOOL = FIXTURES / "qwen-code" / "tool_then_answer" / "spool" / "qwen-code" / "qwen-code-2026-11-30.jsonl"


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_COLLECTOR_", "XDG_", "OTEL_"))}
    env.update(HOME=str(home), AGENT_COLLECTOR_INGEST__ENABLED="false", AGENT_COLLECTOR_WATCHDOG__ENABLED="false",
               **extra)
    return env


def cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "collector", "attributes", *args, "--home", str(home)], cwd=ROOT,
                          env=environment(home, **env), capture_output=True, text=True, timeout=60)


def live_file(home: Path) -> Path:
    return home / ".config" / "agent-collector" / "attributes.json"


def test_set_unset_and_list(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    done = cli(home, "set", "team=platform", "note=a=b, c")
    assert done.returncode == 0, done.stderr
    assert json.loads(live_file(home).read_text()) == {"team": "platform", "note": "a=b, c"}
    assert oct(live_file(home).stat().st_mode & 0o777) == "0o600"
    assert cli(home, "set", "team=infra").returncode == 0
    config = home / ".config" / "agent-collector" / "config.toml"
    config.write_text('[attributes]\nsite = "berlin"\nteam = "from config"\n')
    listed = cli(home, "list", "--json", OTEL_SPAN_ATTRIBUTES="env.k=v,gen_ai.x=1")
    assert listed.returncode == 0, listed.stderr
    shown = json.loads(listed.stdout)
    assert shown["attributes"] == {"site": "berlin", "team": "infra", "note": "a=b, c", "env.k": "v"}
    assert shown["sources"]["team"] == str(live_file(home)) and shown["sources"]["site"] == "config [attributes]"
    assert shown["sources"]["env.k"] == "OTEL_SPAN_ATTRIBUTES"
    assert len(shown["left_out"]) == 1 and "gen_ai.x" in shown["left_out"][0]
    table = cli(home, "list").stdout
    assert "berlin" in table and "OTEL_SPAN_ATTRIBUTES" not in table  # this call's environment has none
    gone = cli(home, "unset", "team", "nothere")
    assert gone.returncode == 0 and "not set: nothere" in gone.stdout
    assert json.loads(live_file(home).read_text()) == {"note": "a=b, c"}


@pytest.mark.parametrize(("pair", "reason"), [
    ("gen_ai.agent.type=x", "a name the collector sets itself"),
    ("upstream.trace_id=x", "a name the collector sets itself"),
    ("a b=1", "not a plain name"),
    ("novalue", "not KEY=VALUE"),
    ("team=" + "x" * 513, "longer than 512"),
    ("team=a\tb", "control character"),
])
def test_an_unusable_pair_is_refused_and_nothing_written(tmp_path: Path, pair: str, reason: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    done = cli(home, "set", "ok=1", pair)
    assert done.returncode == 2 and reason in done.stderr
    assert not live_file(home).exists()


def test_a_broken_file_is_not_overwritten(tmp_path: Path) -> None:
    home = tmp_path / "home"
    live_file(home).parent.mkdir(parents=True)
    live_file(home).write_text("{not json")
    done = cli(home, "set", "team=a")
    assert done.returncode == 2 and "fix or remove it first" in done.stderr
    assert live_file(home).read_text() == "{not json"


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    home.mkdir()
    log = (tmp_path / "daemon.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "collector", "run", "--home", str(home)], cwd=ROOT,
                            env=environment(home), stdout=subprocess.DEVNULL, stderr=log)
    try:
        yield home
    finally:
        stop_gently(proc)
        log.close()


@pytest.mark.timeout(120)
def test_the_running_daemon_stamps_a_change_without_a_restart(daemon: Path) -> None:
    home = daemon
    data = home / ".local" / "share" / "agent-collector"
    spool = data / "spool" / "qwen-code" / QWEN_SPOOL.name
    lines = QWEN_SPOOL.read_text().splitlines(keepends=True)
    half = len(lines) // 2
    spool.parent.mkdir(parents=True, exist_ok=True)
    spool.write_text("".join(lines[:half]))
    first = wait_for(lambda: read_output(data / "output"), 60, "the daemon's first entries")
    assert first and not any("team" in e for e in first)

    assert cli(home, "set", "team=platform").returncode == 0
    with spool.open("a") as f:
        f.write("".join(lines[half:]))

    def later() -> list[dict[str, object]]:
        return [e for e in read_output(data / "output") if e.get("team") == "platform"]

    stamped = wait_for(later, 60, "entries stamped with the new attribute")
    assert {e["gen_ai.session.id"] for e in stamped} == {e["gen_ai.session.id"] for e in first}
