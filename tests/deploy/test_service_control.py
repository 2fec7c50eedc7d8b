"""`agent-collector service start|stop|restart|status|logs` for real in background mode: the installed
layout (a console script in <data dir>/venv/bin, the supervisor script in its share folder), a real
daemon, `kill -9` of it and the supervisor starting it again within seconds, `stop` leaving no process.
systemd and launchd: the exact commands `service` runs, against recording stand-ins for systemctl,
journalctl and launchctl (no user manager here); their unit files are checked in test_service_scripts."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.waits import free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
CONSOLE_SCRIPT = f"#!{sys.executable}\nimport sys\nfrom collector.cli.main import main\nsys.exit(main())\n"


def our_processes(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


class Installed:
    """What deploy/install.sh --service background leaves, minus pip: the same files in the same places."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.data = self.home / ".local" / "share" / "agent-collector"
        self.config = self.home / ".config" / "agent-collector"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_COLLECTOR_", "XDG_"))}
        self.env.update(HOME=str(self.home), XDG_DATA_HOME=str(self.home / ".local" / "share"),
                        XDG_CONFIG_HOME=str(self.home / ".config"), XDG_STATE_HOME=str(self.home / ".state"))
        venv = self.data / "venv"
        self.bin = venv / "bin" / "agent-collector"
        self.bin.parent.mkdir(parents=True)
        self.bin.write_text(CONSOLE_SCRIPT)
        self.bin.chmod(0o755)
        share = venv / "share" / "agent-collector" / "deploy"
        share.mkdir(parents=True)
        shutil.copy(ROOT / "deploy" / "agent-collector-bg.sh", share)
        (self.data / "service.mode").write_text("background\n")
        (self.data / "service.env").write_text(
            f"AGENT_COLLECTOR_DATA_DIR={self.data}\nAGENT_COLLECTOR_CONFIG_DIR={self.config}\n"
            f"AGENT_COLLECTOR_INGEST__PORT={free_port()}\nPATH={os.environ['PATH']}\n")
        self.log = self.data / "log" / "agent-collector.log"

    def service(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.bin), "service", *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def daemon_pid(self) -> int | None:
        """The pid holding the collector lock (the daemon), when it is alive."""
        with contextlib.suppress(OSError, ValueError):
            pid = int((self.data / "state" / "collector.lock").read_text().strip())
            if pid in our_processes(str(self.bin)) and pid == int((self.data / "agent-collector.pid").read_text()):
                return pid
        return None


@pytest.fixture
def installed(tmp_path: Path) -> Iterator[Installed]:
    layout = Installed(tmp_path)
    yield layout
    for pid in our_processes(str(layout.data)):  # a failed test must not leave its processes running
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(180)
def test_background_service_restarts_a_killed_daemon_and_stops(installed: Installed) -> None:
    down = installed.service("status")
    assert down.returncode == 3 and "not running" in down.stdout and str(installed.log) in down.stdout

    started = installed.service("start")
    assert started.returncode == 0, started.stdout + started.stderr
    first = wait_for(installed.daemon_pid, 15, "a daemon pid", interval=0.1)
    up = installed.service("status")
    assert up.returncode == 0 and f"running (pid {first})" in up.stdout
    overall = subprocess.run([str(installed.bin), "status", "--json"], env=installed.env, capture_output=True,
                             text=True, timeout=60)
    assert overall.returncode == 0
    assert json.loads(overall.stdout)["service"] == {"running": True, "pid": first, "mode": "background"}

    os.kill(first, signal.SIGKILL)
    second = wait_for(lambda: (pid := installed.daemon_pid()) and pid != first and pid, 10,
                      "a new daemon pid", interval=0.1)
    assert second != first
    log = installed.log.read_text()
    assert f"daemon (pid {first}) exited with status 137" in log and "restarting in 1s" in log
    logs = installed.service("logs")
    assert logs.returncode == 0 and "exited with status 137" in logs.stdout

    restarted = installed.service("restart")
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    third = wait_for(installed.daemon_pid, 15, "a daemon pid", interval=0.1)
    assert third != second and second not in our_processes(str(installed.data))

    stopped = installed.service("stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not our_processes(str(installed.data)), "the supervisor or the daemon is still running"
    after = installed.service("status")
    assert after.returncode == 3
    assert "the daemon last exited with status 0" in after.stdout and "last log lines:" in after.stdout
    overall = subprocess.run([str(installed.bin), "status"], env=installed.env, capture_output=True, text=True,
                             timeout=60)
    assert overall.returncode == 3 and "service: NOT RUNNING (background service)" in overall.stdout
    assert "the daemon last exited with status 0" in overall.stdout and f"log: {installed.log}" in overall.stdout


@pytest.mark.timeout(120)
def test_a_daemon_that_cannot_start_is_reported_with_its_log(installed: Installed) -> None:
    (installed.data / "state").write_text("not a folder\n")  # the config is fine; the daemon dies at start
    started = installed.service("start")
    assert started.returncode == 1
    assert "failed to start (exit status 1)" in started.stderr and "state" in started.stderr
    # The supervisor starts it again after a back-off: a status taken while that new try is still
    # coming up can see it running for a moment, so look until the failed attempt is what shows.
    deadline = time.monotonic() + 20
    status = installed.service("status")
    while status.returncode != 3 and time.monotonic() < deadline:
        time.sleep(0.3)
        status = installed.service("status")
    assert status.returncode == 3 and "last exited with status 1" in status.stdout
    assert "the supervisor will start it again shortly" in status.stdout
    assert installed.service("stop").returncode == 0
    assert not our_processes(str(installed.data)), "the supervisor (or its back-off sleep) is still running"


def test_no_installed_service_is_a_clear_error(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    result = subprocess.run([sys.executable, "-m", "collector", "service", "status"], env=env,
                            capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 1 and "no service is installed" in result.stderr
    assert "agent-collector run" in result.stderr
    (tmp_path / "data" / "agent-collector").mkdir(parents=True)
    (tmp_path / "data" / "agent-collector" / "service.mode").write_text("none\n")
    result = subprocess.run([sys.executable, "-m", "collector", "service", "start"], env=env,
                            capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 1 and "--service none" in result.stderr


STAND_IN = """#!/bin/sh
printf '%s\\n' "$(basename "$0") $*" >>"$CALLS"
case "$(basename "$0") $1 $2" in
  "systemctl --user show")
    printf 'ActiveState=failed\\nSubState=failed\\nResult=exit-code\\nMainPID=0\\nExecMainStatus=2\\n' ;;
  "journalctl --user -u") echo "Dec 01 agent-collector[7]: config error: bad key" ;;
  "launchctl print "*)
    printf 'gui/501/io.agent-collector.daemon = {\\n\\tstate = not running\\n\\tlast exit code = 78\\n}\\n' ;;
esac
"""


@pytest.fixture
def stand_ins(tmp_path: Path) -> tuple[dict[str, str], Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("systemctl", "journalctl", "launchctl"):
        (bin_dir / tool).write_text(STAND_IN)
        (bin_dir / tool).chmod(0o755)
    calls = tmp_path / "calls.txt"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path / "home"),
           "XDG_DATA_HOME": str(tmp_path / "data"), "CALLS": str(calls)}
    (tmp_path / "data" / "agent-collector").mkdir(parents=True)
    return env, calls


def run_service(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "collector", "service", *args], env=env, capture_output=True,
                          text=True, cwd=ROOT, timeout=60)


def test_systemd_mode_commands(stand_ins: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    env, calls = stand_ins
    (tmp_path / "data" / "agent-collector" / "service.mode").write_text("systemd\n")
    for action in ("start", "stop", "restart"):
        assert run_service(env, action).returncode == 0
    assert run_service(env, "logs", "-f").returncode == 0
    status = run_service(env, "status")
    assert status.returncode == 3
    assert "failed/failed, result exit-code, last exit status 2" in status.stdout
    assert "config error: bad key" in status.stdout
    assert calls.read_text().splitlines() == [
        "systemctl --user start agent-collector.service",
        "systemctl --user stop agent-collector.service",
        "systemctl --user restart agent-collector.service",
        "journalctl --user -u agent-collector.service -n 50 --no-pager -f",
        "systemctl --user show agent-collector.service -p ActiveState,SubState,Result,MainPID,ExecMainStatus",
        "journalctl --user -u agent-collector.service -n 10 --no-pager",
    ]


def test_launchd_mode_commands(stand_ins: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    env, calls = stand_ins
    data = tmp_path / "data" / "agent-collector"
    (data / "service.mode").write_text("launchd\n")
    (data / "log").mkdir()
    (data / "log" / "agent-collector.log").write_text("starting\nconfig error: bad key\n")
    target = f"gui/{os.getuid()}/io.agent-collector.daemon"
    for action in ("start", "stop", "restart"):
        assert run_service(env, action).returncode == 0
    status = run_service(env, "status")
    assert status.returncode == 3 and "state not running, last exit code 78" in status.stdout
    assert "config error: bad key" in status.stdout
    assert calls.read_text().splitlines() == [
        f"launchctl print {target}", f"launchctl kickstart {target}",
        f"launchctl bootout {target}",
        f"launchctl kickstart -k {target}",
        f"launchctl print {target}",
    ]

