"""Shared by the hostile-input tests: a real daemon (`agent-collector run`) in a subprocess with its own
HOME, data and config dirs and a free loopback port, and small HTTP helpers that send the ingest token
when one exists."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support import read_output
from support.waits import free_port


class Daemon:
    def __init__(self, tmp: Path, extra_env: dict[str, str] | None = None) -> None:
        self.tmp = tmp
        self.home = tmp / "home"
        self.data = tmp / "data"
        self.out = tmp / "out"
        self.home.mkdir(exist_ok=True)
        self.port = free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_COLLECTOR_", "OTEL_"))}
        self.env.update({"HOME": str(self.home), "XDG_CONFIG_HOME": str(self.home / ".config"),
                         "XDG_DATA_HOME": str(self.home / ".local/share"), "XDG_STATE_HOME": str(self.home / ".state"),
                         "AGENT_COLLECTOR_DATA_DIR": str(self.data), "AGENT_COLLECTOR_CONFIG_DIR": str(tmp / "cfg"),
                         "AGENT_COLLECTOR_INGEST__PORT": str(self.port),
                         "AGENT_COLLECTOR_COLLECTOR__POLL_INTERVAL_S": "0.2", **(extra_env or {})})
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Daemon:
        return self.spawn().wait_ready()

    def spawn(self) -> Daemon:
        """Start the daemon without waiting for it (:meth:`wait_ready` waits)."""
        with open(self.tmp / "daemon.log", "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "collector", "run", "--home", str(self.home),
                                          "--output", str(self.out)], env=self.env, stdout=subprocess.DEVNULL,
                                         stderr=log)
        return self

    def wait_ready(self, timeout: float = 30) -> Daemon:
        """Until the ingest answers ``/v1/status``."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log()
            try:
                self.get("/v1/status")
                return self
            except OSError:
                time.sleep(0.1)
        raise AssertionError("daemon did not answer: " + self.log())

    def start_quiet(self) -> Daemon:
        """Start without the ingest (AGENT_COLLECTOR_INGEST__ENABLED=false): ready when it writes status."""
        status = self.data / "state" / "status.json"
        status.unlink(missing_ok=True)
        self.proc = subprocess.Popen([sys.executable, "-m", "collector", "run", "--home", str(self.home),
                                      "--output", str(self.out)], env=self.env, stdout=subprocess.DEVNULL,
                                     stderr=open(self.tmp / "daemon.log", "ab"))  # noqa: SIM115
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not status.exists():
            assert self.proc.poll() is None, self.log()
            time.sleep(0.1)
        assert status.exists(), "daemon wrote no status: " + self.log()
        return self

    def log(self) -> str:
        path = self.tmp / "daemon.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _headers(self) -> dict[str, str]:
        token = self.data / "state" / "ingest.token"
        headers = {"Content-Type": "application/json"}
        if token.exists():
            headers["X-Agent-Collector-Token"] = token.read_text().strip()
        return headers

    def post(self, agent: str, body: bytes) -> int:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/hooks/{agent}", data=body,
                                         headers=self._headers(), method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)

    def get(self, path: str) -> Any:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", headers=self._headers())
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())

    def wait_output(self, predicate: Any, timeout: float = 30) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, "daemon died: " + self.log()
            entries = read_output(self.out) if self.out.exists() else []
            if predicate(entries):
                return entries
            time.sleep(0.1)
        raise AssertionError("output never matched; log: " + self.log()[-3000:])

    def status_file(self) -> dict[str, Any]:
        """The status the daemon last wrote ({} before its first cycle wrote one)."""
        try:
            return dict(json.loads((self.data / "state" / "status.json").read_text()))
        except FileNotFoundError:
            return {}

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                raise AssertionError("daemon ignored SIGTERM: " + self.log()) from None
        return int(self.proc.returncode)


def wait_status(daemon: Daemon, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert daemon.proc is not None and daemon.proc.poll() is None, "daemon died: " + daemon.log()[-3000:]
        with contextlib.suppress(OSError, ValueError):
            status = daemon.status_file()
            if predicate(status):
                return status
        time.sleep(0.1)
    raise AssertionError("status never matched: " + daemon.log()[-3000:])
