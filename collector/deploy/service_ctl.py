"""Control the installed user service, whichever mode deploy/install.sh chose (``<data dir>/service.mode``):
a systemd user unit, a launchd LaunchAgent, or the background process run by
``<venv>/share/agent-collector/deploy/agent-collector-bg.sh`` (a supervisor that restarts the daemon).

Each mode maps ``start | stop | restart | status | logs [-f]`` onto its own tool; the commands run with
the caller's terminal, so their output is what the user sees. ``status`` returns 0 when the daemon runs
and 3 when it does not, after saying why (the last exit status and the last log lines)."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from collector.deploy.units import LABEL, UNIT_NAME
from collector.paths import Paths

ACTIONS = ("start", "stop", "restart", "status", "logs")
MODES = ("systemd", "launchd", "background")
NOT_RUNNING = 3
LOG_LINES = 10


class NoService(RuntimeError):
    """No service is installed (deploy/install.sh was not run, or ran with --service none)."""


@dataclass(frozen=True, slots=True)
class ServiceControl:
    mode: str
    paths: Paths

    @property
    def log_file(self) -> Path:
        return self.paths.data_dir / "log" / "agent-collector.log"

    @property
    def bg_script(self) -> Path:
        return self.paths.data_dir / "venv" / "share" / "agent-collector" / "deploy" / "agent-collector-bg.sh"

    @property
    def launchd_target(self) -> str:
        return f"gui/{os.getuid()}/{LABEL}"

    @property
    def plist(self) -> Path:
        return self.paths.home / "Library" / "LaunchAgents" / f"{LABEL}.plist"


def installed_mode(paths: Paths) -> str | None:
    """The mode install.sh recorded, or None when there is no service to control."""
    mode = _recorded(paths)
    return mode if mode in MODES else None


def _recorded(paths: Paths) -> str | None:
    try:
        return (paths.data_dir / "service.mode").read_text().strip()
    except OSError:
        return None


def control_for(paths: Paths) -> ServiceControl:
    mode = installed_mode(paths)
    if mode is None and _recorded(paths) == "none":
        raise NoService("deploy/install.sh ran with --service none: there is no service to control; run the "
                        "daemon with `agent-collector run`, or install again with --service auto")
    if mode is None:
        raise NoService(
            f"no service is installed for {paths.data_dir} (no service.mode there): `sh deploy/install.sh` "
            "installs one; without it run the daemon in the foreground with `agent-collector run`"
        )
    return ServiceControl(mode, paths)


def run_action(ctl: ServiceControl, action: str, follow: bool = False) -> int:
    if action == "status":
        return status(ctl)
    if action == "logs":
        return _call(logs_command(ctl, follow))
    if ctl.mode == "launchd" and action == "start":
        return _launchd_start(ctl)
    return _call(action_command(ctl, action))


def action_command(ctl: ServiceControl, action: str) -> list[str]:
    """The command for start, stop or restart in this mode."""
    if ctl.mode == "systemd":
        return ["systemctl", "--user", action, UNIT_NAME]
    if ctl.mode == "launchd":
        if action == "stop":
            return ["launchctl", "bootout", ctl.launchd_target]
        return ["launchctl", "kickstart", "-k", ctl.launchd_target]
    return ["sh", str(ctl.bg_script), action]


def logs_command(ctl: ServiceControl, follow: bool) -> list[str]:
    if ctl.mode == "systemd":
        return ["journalctl", "--user", "-u", UNIT_NAME, "-n", "50", "--no-pager", *(["-f"] if follow else [])]
    if ctl.mode == "background":
        return ["sh", str(ctl.bg_script), "logs", *(["-f"] if follow else [])]
    return ["tail", "-n", "50", *(["-f"] if follow else []), str(ctl.log_file)]


def status(ctl: ServiceControl) -> int:
    if ctl.mode == "background":
        return _call(["sh", str(ctl.bg_script), "status"])
    if ctl.mode == "systemd":
        return _systemd_status(ctl)
    return _launchd_status(ctl)


def down_reason(ctl: ServiceControl) -> list[str]:
    """Why the service is not running, for `agent-collector status`: last exit, log path, last log lines."""
    if ctl.mode == "systemd":
        props = _systemd_props()
        lines = [f"systemd: {props.get('ActiveState', 'unknown')}/{props.get('SubState', '?')}, result "
                 f"{props.get('Result', '?')}, last exit status {props.get('ExecMainStatus', '?')}",
                 f"log: journalctl --user -u {UNIT_NAME}"]
        return lines + _journal_tail().splitlines()
    if ctl.mode == "launchd":
        printed = _capture(["launchctl", "print", ctl.launchd_target])
        lines = [f"launchd: {'loaded' if printed else 'not loaded'}, last exit code "
                 f"{_field(printed, 'last exit code') or '?'}"]
    else:
        lines = [_background_last_exit(ctl)]
    return lines + [f"log: {ctl.log_file}"] + _tail_file(ctl.log_file).splitlines()


def _background_last_exit(ctl: ServiceControl) -> str:
    try:
        rc, at = (ctl.paths.data_dir / "service.last-exit").read_text().split()[:2]
        return f"background: the daemon last exited with status {rc} {time.time() - int(at):.0f}s ago"
    except (OSError, ValueError):
        return "background: no exit recorded (not started since install, or stopped with `service stop`)"


def _systemd_props() -> dict[str, str]:
    shown = _capture(["systemctl", "--user", "show", UNIT_NAME,
                      "-p", "ActiveState,SubState,Result,MainPID,ExecMainStatus"])
    return dict(line.partition("=")[::2] for line in shown.splitlines() if "=" in line)


def _journal_tail() -> str:
    return _capture(["journalctl", "--user", "-u", UNIT_NAME, "-n", str(LOG_LINES), "--no-pager"])


def _systemd_status(ctl: ServiceControl) -> int:
    props = _systemd_props()
    if props.get("ActiveState") == "active":
        print(f"agent-collector: running (systemd, pid {props.get('MainPID', '?')})")
        return 0
    print(f"agent-collector: not running (systemd: {props.get('ActiveState', 'unknown')}/"
          f"{props.get('SubState', '?')}, result {props.get('Result', '?')}, "
          f"last exit status {props.get('ExecMainStatus', '?')})")
    print(f"log: journalctl --user -u {UNIT_NAME}")
    _print_tail(_journal_tail())
    return NOT_RUNNING


def _launchd_status(ctl: ServiceControl) -> int:
    printed = _capture(["launchctl", "print", ctl.launchd_target])
    state = _field(printed, "state")
    if state == "running":
        print(f"agent-collector: running (launchd, pid {_field(printed, 'pid') or '?'}), log {ctl.log_file}")
        return 0
    loaded = "not loaded" if not printed else f"state {state or 'unknown'}"
    print(f"agent-collector: not running (launchd: {loaded}, last exit code "
          f"{_field(printed, 'last exit code') or '?'})")
    print(f"log: {ctl.log_file}")
    _print_tail(_tail_file(ctl.log_file))
    return NOT_RUNNING


def _launchd_start(ctl: ServiceControl) -> int:
    if not _capture(["launchctl", "print", ctl.launchd_target]):  # not loaded (stopped by bootout)
        return _call(["launchctl", "bootstrap", f"gui/{os.getuid()}", str(ctl.plist)])
    return _call(["launchctl", "kickstart", ctl.launchd_target])


def _field(text: str, name: str) -> str | None:
    match = re.search(rf"^\s*{re.escape(name)} = (.+)$", text, flags=re.M)
    return match.group(1).strip() if match else None


def _tail_file(path: Path) -> str:
    try:
        lines = path.read_text("utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-LOG_LINES:])


def _print_tail(text: str) -> None:
    if text.strip():
        print("last log lines:")
        for line in text.splitlines():
            print(f"    {line}")


def _call(command: Sequence[str]) -> int:
    try:
        return subprocess.call(list(command))
    except FileNotFoundError:
        print(f"agent-collector: {command[0]} is not available on this machine")
        return 1


def _capture(command: Sequence[str]) -> str:
    """Output of a query command; empty when it fails or is missing."""
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""
