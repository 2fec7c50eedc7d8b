"""Real Chromium (Debian's package) driven headless for the dashboard's browser tests: one process per page load
(a new tab: a new login), the DOM dumped or a screenshot taken; the daemon started as the user starts it and the
one-time login link `agent-collector dashboard` prints."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from collector.paths import Paths
from support import ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    def __init__(self, tmp: Path) -> None:
        self.profile = tmp / "chromium-profile"
        self.env = {**os.environ, "HOME": str(tmp / "chromium-home")}

    def run(self, url: str, *extra: str) -> str:
        assert CHROMIUM is not None
        command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                   "--disable-extensions", f"--user-data-dir={self.profile}", "--virtual-time-budget=8000",
                   "--window-size=1400,2400", *extra, url]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=self.env)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout


def env(paths: Paths, port: int) -> dict[str, str]:
    return {**os.environ, "AGENT_COLLECTOR_DATA_DIR": str(paths.data_dir),
            "AGENT_COLLECTOR_CONFIG_DIR": str(paths.config_dir), "AGENT_COLLECTOR_INGEST__PORT": str(port),
            "AGENT_COLLECTOR_WATCHDOG__ENABLED": "false", "HOME": str(paths.home)}


def start_daemon(paths: Paths, port: int, log: Path) -> subprocess.Popen[bytes]:
    """The daemon, its log in a file (a pipe nobody reads would fill up and stall it)."""
    with log.open("wb") as sink:
        return subprocess.Popen([sys.executable, "-m", "collector", "run", "--home", str(paths.home)],
                                env=env(paths, port), stdout=subprocess.DEVNULL, stderr=sink, cwd=ROOT)


def login_link(paths: Paths, port: int, query: str = "?days=366") -> tuple[str, str]:
    """What the user runs: `agent-collector dashboard`; the link with ``query`` put before its fragment,
    and the one-time code."""
    done = subprocess.run([sys.executable, "-m", "collector", "dashboard", "--home", str(paths.home)],
                          env=env(paths, port), capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    match = re.fullmatch(rf"http://127\.0\.0\.1:{port}/dashboard/#code=([A-Za-z0-9_-]{{32}})\n", done.stdout)
    assert match, done.stdout
    return f"http://127.0.0.1:{port}/dashboard/{query}#code={match.group(1)}", match.group(1)


def shown_values(dom: str) -> dict[str, str]:
    return {k: html.unescape(v) for k, v in re.findall(r'data-k="([^"]+)"[^>]*>([^<]*)<', dom)}


