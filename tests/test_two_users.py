"""Two homes, two real daemons on one machine: `install` gives each its own secret and its own port and
writes both into the Claude Code plugin; each daemon gets only its own hooks; a hook carrying the other
home's secret, or none, is refused with 401 and counted; /v1/status and /v1/sessions need the secret."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from waits import wait_for

from collector.paths import Paths, resolve_paths

ROOT = Path(__file__).resolve().parents[1]
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_COLLECTOR_", "OTEL_", "XDG_"))}
    env.update(HOME=str(home), AGENT_COLLECTOR_HOME=str(home))  # no ingest.port: chosen per user
    return env


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "collector", *args], cwd=ROOT, env=_env(home),
                          capture_output=True, text=True, timeout=120, check=False)


def _plugin_hook(paths: Paths) -> tuple[str, dict[str, str]]:
    """The url and headers Claude Code's http hook sends, read from the plugin `install` wrote."""
    hooks = json.loads((paths.home / ".claude" / "skills" / "agent-collector" / "hooks" / "hooks.json").read_text())
    (hook,) = hooks["hooks"]["Stop"][0]["hooks"]
    return str(hook["url"]), dict(hook["headers"])


def _request(url: str, headers: dict[str, str], body: dict[str, Any] | None = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **headers})
    try:
        with OPENER.open(request, timeout=5) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def _output(paths: Paths) -> str:
    return "".join(p.read_text() for p in sorted(paths.output_dir.glob("activity-*.jsonl")))


@pytest.fixture
def homes(tmp_path: Path) -> Iterator[list[tuple[Paths, subprocess.Popen[str]]]]:
    started: list[tuple[Paths, subprocess.Popen[str]]] = []
    for name in ("alice", "bob"):
        home = tmp_path / name
        home.mkdir()
        installed = _cli(home, "install", "--agent", "claude-code")
        assert installed.returncode == 0, installed.stderr
        paths = resolve_paths(home, env={})
        proc = subprocess.Popen([sys.executable, "-m", "collector", "run"], cwd=ROOT, env=_env(home),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        started.append((paths, proc))
        url, headers = _plugin_hook(paths)
        status_url = url.split("/v1/")[0] + "/v1/status"
        wait_for(lambda u=status_url, h=headers: _request(u, h)[0] == 200, 30, "the ingest", 0.1, (OSError, ValueError))  # type: ignore[misc]
    yield started
    for _, proc in started:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        finally:
            if proc.poll() is None:
                proc.kill()


def test_two_homes_two_daemons_each_gets_only_its_own(homes: list[tuple[Paths, subprocess.Popen[str]]]) -> None:
    (alice, _), (bob, _) = homes
    a_url, a_headers = _plugin_hook(alice)
    b_url, b_headers = _plugin_hook(bob)
    assert a_url != b_url, "each user got a port of their own"
    assert a_headers != b_headers, "and a secret of their own"
    assert alice.ingest_port_file.read_text().strip() in a_url and bob.ingest_port_file.read_text().strip() in b_url

    def hook(session: str) -> dict[str, Any]:
        return {"session_id": session, "hook_event_name": "UserPromptSubmit", "prompt": "hi",
                "cwd": "/work/p", "transcript_path": "/nonexistent/t.jsonl"}

    assert _request(a_url, a_headers, hook("alice-session"))[0] == 200
    assert _request(b_url, b_headers, hook("bob-session"))[0] == 200
    # bob's hook reaching alice's daemon (her port, his secret) and a hook with no secret: refused
    assert _request(a_url, b_headers, hook("bob-misrouted"))[0] == 401
    assert _request(a_url, {}, hook("anonymous"))[0] == 401
    a_base, b_base = a_url.split("/v1/")[0], b_url.split("/v1/")[0]
    for path in ("/v1/status", "/v1/sessions"):
        status, body = _request(a_base + path, {})
        assert status == 401 and b"alice-session" not in body
        assert _request(a_base + path, b_headers)[0] == 401
    wait_for(lambda: "alice-session" in _output(alice) and "bob-session" in _output(bob), 30, "both outputs", 0.1,
             (OSError, ValueError))
    status, body = _request(a_base + "/v1/status", a_headers)
    assert status == 200 and json.loads(body)["ingest"]["requests"]["rejected_401"] == 6, "2 hooks, 4 reads"
    assert json.loads(_request(b_base + "/v1/status", b_headers)[1])["ingest"]["requests"].get("rejected_401", 0) == 0
    sessions = json.loads(_request(a_base + "/v1/sessions", a_headers)[1])["sessions"]
    assert [s["session_id"] for s in sessions] == ["alice-session"]
    assert "bob" not in _output(alice) and "anonymous" not in _output(alice)
    assert "alice" not in _output(bob)
