"""Two real Unix users on one machine (issue 22 item 1): user B binds user A's ingest port before A's
daemon starts. A's daemon moves to a free port and says so (status, doctor); A's Claude Code hooks (the
drop-in plugin's real hook commands) spool and reach A's output; A's clients never send the token to B's
port; B receives nothing at all. Needs root to create user B (CI runs as root); skipped elsewhere."""

from __future__ import annotations

import importlib.util
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.robust import Daemon

USER_B = "acollb"
B_PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "/usr/bin/python3"  # B may run it
LISTENER = r'''
import socket, sys
port, capture = int(sys.argv[1]), sys.argv[2]
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(16)
open(capture + ".ready", "w").close()
while True:
    conn, _ = server.accept()
    conn.settimeout(2)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    with open(capture, "ab") as f:
        f.write(data + b"\n--\n")
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
    conn.close()
'''

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("setpriv"),
                                reason="needs root (to create a second user) and useradd/setpriv")


@pytest.fixture(scope="module")
def user_b() -> Iterator[pwd.struct_passwd]:
    """The second user, made for the test and removed after it (one that was there already is kept)."""
    existed = USER_B in {u.pw_name for u in pwd.getpwall()}
    if not existed:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER_B],
                       check=True)
    try:
        yield pwd.getpwnam(USER_B)
    finally:
        if not existed:
            subprocess.run(["userdel", USER_B], check=False, capture_output=True)


def _cli(daemon: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "collector", *args, "--home", str(daemon.home)], env=daemon.env,
                          capture_output=True, text=True, timeout=60)


def _agentty_panel() -> Any:
    """The Agentty panel program (a standalone file, not a package module)."""
    path = Path(__file__).resolve().parents[2] / "integrations" / "agentty" / "agent-collector" / "agentty_panel.py"
    spec = importlib.util.spec_from_file_location("agentty_panel_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hook_commands(daemon: Daemon) -> dict[str, str]:
    hooks = json.loads((daemon.home / ".claude" / "skills" / "agent-collector" / "hooks" / "hooks.json").read_text())
    return {event: groups[0]["hooks"][0]["command"] for event, groups in hooks["hooks"].items()}


def test_a_neighbour_on_our_port_gets_nothing_and_every_event_arrives(tmp_path: Path,
                                                                     user_b: pwd.struct_passwd) -> None:
    b_dir = Path(tempfile.mkdtemp(prefix="agent-collector-user-b."))  # B cannot enter root's pytest dirs
    os.chmod(b_dir, 0o755)
    os.chown(b_dir, user_b.pw_uid, user_b.pw_gid)
    (b_dir / "listener.py").write_text(LISTENER)
    capture = b_dir / "capture"
    (tmp_path / "a").mkdir()
    daemon = Daemon(tmp_path / "a")
    (daemon.home / ".claude").mkdir()  # Claude Code is installed for A
    taken = daemon.port
    listener = subprocess.Popen(["setpriv", f"--reuid={user_b.pw_uid}", f"--regid={user_b.pw_gid}", "--clear-groups",
                                 B_PYTHON, "-I", str(b_dir / "listener.py"), str(taken), str(capture)])
    try:
        deadline = time.monotonic() + 30
        while not Path(str(capture) + ".ready").exists():
            assert listener.poll() is None and time.monotonic() < deadline, "B's listener did not start"
            time.sleep(0.05)
        installed = _cli(daemon, "install", "--agent", "claude-code")
        assert installed.returncode == 0, installed.stderr
        daemon.start_quiet()
        token = (daemon.data / "state" / "ingest.token").read_text().strip()
        moved = json.loads((daemon.data / "state" / "ingest.moved.json").read_text())
        assert moved["taken_port"] == taken and moved["port"] != taken and moved["owner_uid"] == user_b.pw_uid
        assert f"ingest port {taken} is held by another user (uid {user_b.pw_uid})" in daemon.log()

        session = "2b000000-0000-4000-8000-00000000000a"
        payloads = {
            "SessionStart": {"session_id": session, "hook_event_name": "SessionStart", "source": "startup",
                             "cwd": "/w"},
            "UserPromptSubmit": {"session_id": session, "hook_event_name": "UserPromptSubmit",
                                 "prompt": "the secret plan for tomorrow", "cwd": "/w"},
            "PreToolUse": {"session_id": session, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                           "tool_use_id": "toolu_twousers", "tool_input": {"command": "ls"}, "cwd": "/w"},
            "Stop": {"session_id": session, "hook_event_name": "Stop", "cwd": "/w"},
        }
        commands = _hook_commands(daemon)
        hook_env = {k: v for k, v in daemon.env.items() if not k.startswith("AGENT_COLLECTOR_")}
        for event, payload in payloads.items():
            done = subprocess.run(["sh", "-c", commands[event]], input=json.dumps(payload), text=True, env=hook_env,
                                  capture_output=True, timeout=30)
            assert done.returncode == 0 and done.stdout == ""
        entries = daemon.wait_output(lambda es: {"session.start", "user.prompt", "tool.call"} <= {
            e["event.name"] for e in es if e.get("gen_ai.session.id") == session}, timeout=60)
        assert sum(e.get("gen_ai.tool.call.id") == "toolu_twousers" for e in entries) == 1

        # A's clients: they find the daemon where it moved; pointed at B's port they send nothing
        sessions = _cli(daemon, "sessions", "--json", "--all")
        assert sessions.returncode == 0, sessions.stderr
        assert session in sessions.stdout
        refused = _cli(daemon, "sessions", "--url", f"http://127.0.0.1:{taken}")
        assert refused.returncode == 1 and f"held by another user (uid {user_b.pw_uid})" in refused.stderr
        panel = _agentty_panel()
        assert f"held by another user (uid {user_b.pw_uid})" in str(panel.foreign_listener(f"http://127.0.0.1:{taken}"))
        assert panel.Daemon(f"http://127.0.0.1:{taken}", token).sessions()[0] is None  # refused before sending
        assert panel.foreign_listener(f"http://127.0.0.1:{moved['port']}") is None  # our own daemon
        link = _cli(daemon, "dashboard")
        assert link.returncode == 0 and link.stdout.startswith(f"http://127.0.0.1:{moved['port']}/dashboard/#code=")
        status = _cli(daemon, "status")
        assert f"ingest port {taken} was held by another user (uid {user_b.pw_uid})" in status.stdout
        doctor = _cli(daemon, "doctor", "--json")
        ingest = [f for f in json.loads(doctor.stdout)["findings"] if f["check"] == "ingest"]
        assert ingest and ingest[0]["level"] == "warn" and str(moved["port"]) in ingest[0]["message"]
    finally:
        if daemon.proc is not None:
            daemon.stop()
        listener.kill()
        listener.wait(10)
    received = capture.read_bytes() if capture.exists() else b""
    shutil.rmtree(b_dir, ignore_errors=True)
    assert received == b"", f"B received: {received[:500]!r}"
    assert token.encode() not in received and b"secret plan" not in received
