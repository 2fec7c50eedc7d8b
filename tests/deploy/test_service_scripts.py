"""deploy/install.sh and deploy/uninstall.sh for real, in a throwaway HOME (XDG dirs inside it) holding
the real config files of every agent: dry run changes nothing; install deploys, starts the daemon in
background mode (no user systemd here) and `status` sees it; installing again is an in-place upgrade;
uninstall stops the daemon (no process left) and leaves every agent file byte-identical. Also: the
systemd unit and the launchd plist rendered from the templates, checked by systemd-analyze and plistlib."""

from __future__ import annotations

import contextlib
import json
import os
import plistlib
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.deploy import agent_snapshot, choose_settings_variant, make_home, snapshot
from support.waits import free_port

from collector.deploy.hookcmd import hook_shell
from collector.deploy.units import render_launchd, render_systemd
from collector.paths import Paths

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "deploy" / "install.sh"
UNINSTALL = ROOT / "deploy" / "uninstall.sh"
# pip needs setuptools/wheel for its isolated build: keep them cached across runs, outside the HOME.
PIP_CACHE = Path(os.environ.get("AGENT_COLLECTOR_TEST_PIP_CACHE", "/tmp/agent-collector-test-pip-cache"))
PROFILE = "# my profile\nexport EDITOR=vi\n"


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    home = make_home(tmp_path, comments=True)
    (home / ".profile").write_text(PROFILE)
    drop = ("AGENT_COLLECTOR_", "XDG_", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update({
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "PIP_CACHE_DIR": str(PIP_CACHE),
        "PIP_DEFAULT_TIMEOUT": "15",  # a network problem fails the test fast instead of hanging it
        "PIP_RETRIES": "1",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "AGENT_COLLECTOR_INGEST__PORT": str(free_port()),
    })
    yield home, env
    for pid in our_processes(str(home)):  # a failed test must not leave its daemon running
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def sh(script: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", str(script), *args], env=env, capture_output=True, text=True, timeout=300)


def install_args() -> list[str]:
    return ["--service", "background", "--python", sys.executable, "--deps-from", sys.prefix]


def our_processes(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.timeout(400)
def test_install_upgrade_uninstall_in_a_throwaway_home(sandbox: tuple[Path, dict[str, str]]) -> None:
    home, env = sandbox
    data = home / ".local" / "share" / "agent-collector"
    config = home / ".config" / "agent-collector"
    paths = Paths(home=home, config_dir=config, data_dir=data)
    choose_settings_variant(paths)  # Claude Code on settings.json hooks: the command-hook path end to end
    venv = data / "venv"
    bin_ = venv / "bin" / "agent-collector"
    original = agent_snapshot(home, paths)
    original_profile = (home / ".profile").read_bytes()

    # dry run: every change printed, nothing changed anywhere in HOME
    before = snapshot(home)
    dry = sh(INSTALL, *install_args(), "--autostart-profile", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert snapshot(home) == before
    assert "would run:" in dry.stdout and "would write" in dry.stdout
    assert "dry run: nothing was changed" in dry.stdout
    assert "claude-code: would update" in dry.stdout  # the agents' changes, listed exactly

    # install: program, agents, config, daemon in background mode, autostart block in ~/.profile
    done = sh(INSTALL, *install_args(), "--autostart-profile", env=env)
    assert "installing the program and its dependencies with pip" in done.stdout
    assert "program installed in" in done.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    share_hook = venv / "share" / "agent-collector" / "hooks" / "agent-collector-hook.sh"
    assert share_hook.exists() and (config / "config.toml").exists()
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    commands = [h["command"] for g in settings["hooks"]["Stop"] for h in g["hooks"]]
    ours = [c for c in commands if "agent-collector" in c]
    assert ours == [f"{hook_shell()} {share_hook} claude-code Stop {data / 'spool'}"]
    assert "agent-collector autostart" in (home / ".profile").read_text()
    link = home / ".local" / "bin" / "agent-collector"
    assert link.is_symlink() and link.resolve() == bin_.resolve()
    assert "is not on your PATH" in done.stdout and 'export PATH="$HOME/.local/bin:$PATH"' in done.stdout
    pid = wait_running(bin_, env)
    assert pid in our_processes(str(venv))
    first_log = "\n".join(p.read_text(errors="replace") for p in sorted((data / "log").glob("*.log")))
    alarming = [line for line in first_log.splitlines() if " WARNING " in line or " ERROR " in line]
    assert alarming == [], "the first start of a fresh install logs nothing alarming (issue 23 item 7)"

    # the installed hook really spools, and the running daemon reads it
    subprocess.run(ours[0], shell=True, input=b'{"session_id": "s1", "hook_event_name": "Stop"}', env=env,
                   check=True)
    assert list((data / "spool" / "claude-code").glob("claude-code-*.jsonl"))

    # the installed `service` command controls it; login after a stop: ~/.profile starts it again
    service = subprocess.run([str(bin_), "service", "status"], env=env, capture_output=True, text=True)
    assert service.returncode == 0 and f"running (pid {pid})" in service.stdout
    stopped = subprocess.run([str(bin_), "service", "stop"], env=env, capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 0 and not our_processes(str(venv))
    down = subprocess.run([str(bin_), "status"], env=env, capture_output=True, text=True, timeout=60)
    assert down.returncode == 3 and "NOT RUNNING (background service)" in down.stdout
    subprocess.run(["sh", "-c", ". \"$HOME/.profile\""], env=env, check=True, timeout=60)
    wait_running(bin_, env)

    # install again = upgrade in place: agent files as after one install, config and state kept
    installed = agent_snapshot(home, paths)
    (config / "config.toml").write_text((config / "config.toml").read_text() + "\n# my edit\n")
    checkpoints = data / "state" / "checkpoints.sqlite"
    assert checkpoints.exists()
    on_path = {**env, "PATH": f"{link.parent}:{env['PATH']}"}
    started = time.monotonic()
    again = sh(INSTALL, *install_args(), "--autostart-profile", env=on_path)
    took = time.monotonic() - started
    assert again.returncode == 0, again.stdout + again.stderr
    assert "upgrading the existing installation" in again.stdout
    # nothing changed in the program: the environment is reused, no pip run (issue 23 item 6)
    assert "program unchanged since the last install: reusing" in again.stdout and "pip install" not in again.stdout
    assert took < 30, f"a second install with nothing changed took {took:.0f} s"
    assert f"agent-collector is on your PATH ({link} -> {bin_})" in again.stdout
    assert agent_snapshot(home, paths) == installed
    assert (config / "config.toml").read_text().endswith("# my edit\n") and checkpoints.exists()
    new_pid = wait_running(bin_, env)
    supervisor = int((data / "agent-collector.supervisor.pid").read_text())
    assert sorted(our_processes(str(venv))) == sorted([new_pid, supervisor])  # one daemon, its supervisor

    # uninstall: daemon stopped, nothing left running, agent files byte-identical, data and config kept
    gone = sh(UNINSTALL, env=env)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert not our_processes(str(venv))
    assert not venv.exists()
    assert not link.is_symlink() and not link.parent.exists(), "the link and the folder we made are gone"
    assert agent_snapshot(home, paths) == original
    assert (home / ".profile").read_bytes() == original_profile
    assert not (data / "spool").exists(), "the spool holds raw payloads: gone even without --purge"
    assert checkpoints.exists() and (config / "config.toml").exists()
    purge = sh(UNINSTALL, "--purge", env=env)
    # the program is gone already, and so are our hooks (the first uninstall took them out): nothing to do
    assert purge.returncode == 0 and "nothing to take out of the agents" in purge.stdout, purge.stderr
    assert not data.exists() and not config.exists()


def wait_running(bin_: Path, env: dict[str, str], timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = subprocess.run([str(bin_), "status", "--json"], env=env, capture_output=True, text=True)
        if result.returncode == 0:
            service = json.loads(result.stdout)["service"]
            if service["running"]:
                return int(service["pid"])
        time.sleep(0.3)
    raise AssertionError("the daemon is not running according to `agent-collector status`")


def test_uninstall_without_purge_deletes_the_spool(sandbox: tuple[Path, dict[str, str]]) -> None:
    """Issue 23 item 8: raw prompts do not outlive an uninstall; the rest of the data and the config stay."""
    home, env = sandbox
    data, config = home / ".local" / "share" / "agent-collector", home / ".config" / "agent-collector"
    line = '{"ts": 1, "agent": "claude-code", "event": "UserPromptSubmit", "payload": {"prompt": "hello"}}\n'
    spool = data / "spool" / "claude-code"
    spool.mkdir(parents=True)
    (spool / "claude-code-2026-12-01.jsonl").write_text(line)
    (spool / "claude-code-2026-12-02.jsonl.swept").write_text(line)
    (data / "state").mkdir()
    (data / "state" / "checkpoints.sqlite").write_bytes(b"kept")
    config.mkdir(parents=True)
    (config / "config.toml").write_text("# mine\n")
    result = sh(UNINSTALL, env=env)
    assert not (data / "spool").exists(), result.stdout + result.stderr
    assert "deleted the spool" in result.stdout
    assert (data / "state" / "checkpoints.sqlite").read_bytes() == b"kept"
    assert (config / "config.toml").read_text() == "# mine\n"
    assert not any(b"hello" in p.read_bytes() for p in home.rglob("*") if p.is_file() and not p.is_symlink())


def test_uninstall_dry_run_changes_nothing(sandbox: tuple[Path, dict[str, str]]) -> None:
    home, env = sandbox
    before = snapshot(home)
    result = sh(UNINSTALL, "--dry-run", env=env)
    assert snapshot(home) == before
    assert "dry run: nothing was changed" in result.stdout


ENV = {"AGENT_COLLECTOR_DATA_DIR": "/home/u/.local/share/agent-collector", "PATH": "/usr/bin:/bin"}


def test_systemd_unit_from_the_template(tmp_path: Path) -> None:
    exe = tmp_path / "venv with space" / "bin" / "agent-collector"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    unit = render_systemd(str(exe), ENV)
    assert f'ExecStart="{exe}" run' in unit
    assert "Restart=on-failure" in unit and "RestartSec=5" in unit and "WantedBy=default.target" in unit
    assert 'Environment="AGENT_COLLECTOR_DATA_DIR=/home/u/.local/share/agent-collector"' in unit
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    path = tmp_path / "agent-collector.service"
    path.write_text(unit)
    result = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    path.write_text(render_systemd(str(tmp_path / "missing"), ENV))  # the check has teeth
    assert subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True).returncode != 0


def test_launchd_plist_from_the_template() -> None:
    text = render_launchd("/Users/u/Library/Application Support/agent-collector/venv/bin/agent-collector",
                          "/Users/u", "/Users/u/Library/Application Support/agent-collector/log/a&b.log", ENV)
    plist = plistlib.loads(text.encode())
    assert plist["Label"] == "io.agent-collector.daemon"
    assert plist["ProgramArguments"] == [
        "/Users/u/Library/Application Support/agent-collector/venv/bin/agent-collector", "run"]
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] == {"SuccessfulExit": False}
    assert plist["StandardErrorPath"].endswith("a&b.log") and plist["EnvironmentVariables"] == ENV


def test_units_script_runs_with_the_system_python() -> None:
    python = shutil.which("python3") or sys.executable
    script = ROOT / "collector" / "deploy" / "units.py"
    result = subprocess.run([python, str(script), "launchd", "--exec", "/x", "--env", "A=1"],
                            capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert plistlib.loads(result.stdout)["EnvironmentVariables"] == {"A": "1"}
