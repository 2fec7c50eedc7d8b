"""The real daemon on a full disk: every exporter refuses, `status` says so, SIGTERM still stops it
within 5 s, and once space returns a restart writes every entry exactly once (JSONL) and delivers every
one to the OTLP backend. The full disk is a real tmpfs of a few MB holding the JSONL output, the usage
store and the OTLP queues, filled with a filler file (mounting needs root; without it the test is skipped)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import assert_no_duplicates, read_output
from support.otlp_receiver import OtlpReceiver
from support.waits import wait_for

ROOT = Path(__file__).resolve().parents[2]
N_TOOLS = 300
SESSION = "0b8f1c1e-0000-4000-8000-0000000000fd"


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """Fill ``disk`` up to ENOSPC, then give ``leave`` bytes back."""
    filler = disk / "filler"
    with filler.open("wb") as f:
        block = b"\0" * 65536
        try:
            while True:
                f.write(block)
                f.flush()
        except OSError:
            pass
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def write_spool(spool: Path) -> int:
    spool.mkdir(parents=True, exist_ok=True)
    lines = [{"ts": 1796037000.0, "agent": "claude-code", "event": "SessionStart",
              "payload": {"session_id": SESSION, "hook_event_name": "SessionStart", "source": "startup"}},
             {"ts": 1796037000.5, "agent": "claude-code", "event": "UserPromptSubmit",
              "payload": {"session_id": SESSION, "hook_event_name": "UserPromptSubmit", "prompt": "go",
                          "prompt_id": "p1"}}]
    for i in range(N_TOOLS):
        base = {"session_id": SESSION, "tool_name": "Bash", "tool_use_id": f"toolu_{i:06d}", "prompt_id": "p1",
                "tool_input": {"command": f"echo {i}"}}
        lines.append({"ts": 1796037001.0 + i / 100, "agent": "claude-code", "event": "PreToolUse",
                      "payload": {**base, "hook_event_name": "PreToolUse"}})
        lines.append({"ts": 1796037001.005 + i / 100, "agent": "claude-code", "event": "PostToolUse",
                      "payload": {**base, "hook_event_name": "PostToolUse", "tool_response": {"stdout": str(i)},
                                  "duration_ms": 3}})
    lines.append({"ts": 1796037100.0, "agent": "claude-code", "event": "Stop",  # ends the turn: spans go out
                  "payload": {"session_id": SESSION, "hook_event_name": "Stop"}})
    (spool / "claude-code-2026-11-30.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return len(lines) - 1  # every line but Stop gives one entry (Stop gives a session.status)


def status_json(tmp_path: Path) -> dict:  # type: ignore[type-arg]
    try:
        return json.loads((tmp_path / "data" / "state" / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def test_full_disk_sigterm_then_space_returns(tmp_path: Path, tiny_disk: Path) -> None:
    out, queues = tiny_disk / "out", tiny_disk / "queue"
    out.mkdir()
    queues.mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "queue").symlink_to(queues)
    home = tmp_path / "home"
    home.mkdir()
    receiver = OtlpReceiver().start()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local/share"), "XDG_STATE_HOME": str(home / ".local/state"),
           "AGENT_COLLECTOR_DATA_DIR": str(tmp_path / "data"), "AGENT_COLLECTOR_CONFIG_DIR": str(tmp_path / "cfg"),
           "AGENT_COLLECTOR_INGEST__ENABLED": "false", "AGENT_COLLECTOR_COLLECTOR__BATCH_SIZE": "50",
           "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_METRICS_EXPORTER": "none",
           "AGENT_COLLECTOR_OTLP__TURN_GRACE": "0", "AGENT_COLLECTOR_STORE__PATH": str(tiny_disk / "usage.sqlite")}
    cmd = [sys.executable, "-m", "collector", "run", "--home", str(home), "--output", str(out)]
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_for(lambda: "delivery" in status_json(tmp_path) or proc.poll() is not None, 60, "start-up")
            filler = fill(tiny_disk, leave=48 * 1024)  # the disk fills up: room for a batch or two, then ENOSPC
            expected = write_spool(tmp_path / "data" / "spool" / "claude-code")  # the agent goes on working
            wait_for(lambda: (status_json(tmp_path).get("delivery") or {}).get("state") == "blocked"
                       or proc.poll() is not None, 60, "the daemon to report the refusing exporters")
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
            shown = subprocess.run([sys.executable, "-m", "collector", "status", "--home", str(home)], env=env,
                                   capture_output=True, text=True, timeout=60)
            assert "delivery: BLOCKED" in shown.stdout and "entries wait" in shown.stdout, shown.stdout
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pytest.fail("the daemon on a full disk was still running 5 s after SIGTERM")
            assert proc.returncode == 0, proc.stderr.read().decode() if proc.stderr else ""
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
        partial = read_output(out)
        assert len(partial) < expected, "the disk was meant to be full before the end"

        filler.unlink()  # space returns
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            def all_there() -> bool:
                logs = {r["attributes"].get("event.id") for r in receiver.logs()}
                written = read_output(out) if out.exists() else []
                tools = [s for s in receiver.spans() if s["name"].startswith("execute_tool")]
                return len(written) >= expected and len(logs) >= len(written) and len(tools) >= N_TOOLS

            try:
                wait_for(all_there, 90, "every entry in the output and at the backend")
            except AssertionError:
                proc.kill()
                raise AssertionError(f"{len(read_output(out))} written, {len(receiver.logs())} logs, "
                                     f"{len(receiver.spans())} spans of {expected}; {status_json(tmp_path)}; "
                                     f"{proc.stderr.read().decode()[-3000:] if proc.stderr else ''}") from None
            proc.send_signal(signal.SIGTERM)
            proc.wait(5)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
        entries = read_output(out)
        assert_no_duplicates(entries)
        assert len([e for e in entries if e["event.name"] != "session.status"]) == expected
        assert {e["gen_ai.tool.call.id"] for e in entries if e["event.name"] == "tool.result"} == {
            f"toolu_{i:06d}" for i in range(N_TOOLS)}
        assert {r["attributes"].get("event.id") for r in receiver.logs()} == {e["event.id"] for e in entries}
        assert {s["attributes"].get("gen_ai.tool.call.id") for s in receiver.spans()
                if s["name"].startswith("execute_tool")} == {f"toolu_{i:06d}" for i in range(N_TOOLS)}
    finally:
        receiver.stop()


@contextlib.contextmanager
def daemon_with_a_silent_backend(tmp_path: Path, stderr: int,
                                 stop_timeout_s: float = 2.5) -> Iterator[subprocess.Popen[bytes]]:
    """A real daemon whose OTLP backend accepts connections and never answers (300 s timeout), once
    entries wait in its queue; killed afterwards if it still runs. ``stop_timeout_s``: how long its
    exporters may take to drain on a stop."""
    write_spool(tmp_path / "data" / "spool" / "claude-code")
    home = tmp_path / "home"
    home.mkdir()
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)  # never accepted: connections open, no answer ever comes
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(home),
               "AGENT_COLLECTOR_DATA_DIR": str(tmp_path / "data"),
               "AGENT_COLLECTOR_CONFIG_DIR": str(tmp_path / "cfg"), "AGENT_COLLECTOR_INGEST__ENABLED": "false",
               "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{silent.getsockname()[1]}",
               "OTEL_EXPORTER_OTLP_TIMEOUT": "300", "OTEL_METRICS_EXPORTER": "none",
               "OTEL_TRACES_EXPORTER": "none", "AGENT_COLLECTOR_COLLECTOR__STOP_TIMEOUT_S": str(stop_timeout_s)}
        proc = subprocess.Popen([sys.executable, "-m", "collector", "run", "--home", str(home), "--output",
                                 str(tmp_path / "out")], env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            wait_for(lambda: (status_json(tmp_path).get("exporters", {}).get("otlp-default-logs") or {})
                     .get("queued", 0) > 0, 60, "entries waiting in the OTLP queue")
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)


def test_second_signal_exits_at_once(tmp_path: Path) -> None:
    """Stopping waits (bounded) for the OTLP queue to drain to a backend that never answers; a second
    SIGTERM does not wait for that. The first stop may wait 120 s here, so that on a loaded machine it
    cannot end on its own before the second signal is sent. (A backend that refuses connections lets the
    drain give up at once.)"""
    with daemon_with_a_silent_backend(tmp_path, subprocess.PIPE, stop_timeout_s=120) as proc:
        stopping = threading.Event()

        def drain() -> None:  # keep reading: a full pipe must not be what holds the daemon
            assert proc.stderr is not None
            for line in proc.stderr:
                if b"stopping (a second signal exits at once)" in line:
                    stopping.set()

        threading.Thread(target=drain, daemon=True).start()
        proc.send_signal(signal.SIGTERM)
        assert stopping.wait(10), "the first SIGTERM was not taken"
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)  # far less than the 120 s the first stop may take
        # 128+15 from our handler; -15 if it came in the instant the loop's handler was being swapped
        # for the plain one (asyncio restores the default action in between): either way, at once.
        assert proc.returncode in (128 + signal.SIGTERM, -signal.SIGTERM)


def test_sigterm_with_a_backend_that_never_answers(tmp_path: Path) -> None:
    """A request hanging in the OTLP exporter (the backend accepts the connection, then says nothing,
    with a 300 s timeout) does not hold the stop either."""
    with daemon_with_a_silent_backend(tmp_path, subprocess.DEVNULL) as proc:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pytest.fail("the daemon was still running 5 s after SIGTERM with a request hanging")
        assert proc.returncode == 0


def test_daemon_starts_with_the_usage_store_on_a_disk_already_full(tmp_path: Path, tiny_disk: Path) -> None:
    """The usage store cannot even be created: the daemon starts anyway, `status` names the full disk, and
    once space returns the held entries reach the store and the JSONL output exactly once."""
    import sqlite3

    filler = fill(tiny_disk, leave=0)
    store = tiny_disk / "usage.sqlite"
    home = tmp_path / "home"
    home.mkdir()
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local/share"), "XDG_STATE_HOME": str(home / ".local/state"),
           "AGENT_COLLECTOR_DATA_DIR": str(tmp_path / "data"), "AGENT_COLLECTOR_CONFIG_DIR": str(tmp_path / "cfg"),
           "AGENT_COLLECTOR_INGEST__ENABLED": "false", "AGENT_COLLECTOR_COLLECTOR__BATCH_SIZE": "50",
           "AGENT_COLLECTOR_STORE__PATH": str(store)}
    expected = write_spool(tmp_path / "data" / "spool" / "claude-code")
    log = (tmp_path / "daemon.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "collector", "run", "--home", str(home), "--output", str(out)],
                            env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_for(lambda: (status_json(tmp_path).get("delivery") or {}).get("state") == "blocked"
                   or proc.poll() is not None, 60, "the daemon to report the full disk")
        assert proc.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
        blocked = status_json(tmp_path)["delivery"]["blocked"]
        assert blocked["by"] == "usage_store" and "full" in blocked["error"], blocked
        shown = subprocess.run([sys.executable, "-m", "collector", "status", "--home", str(home)], env=env,
                               capture_output=True, text=True, timeout=60)
        assert "delivery: BLOCKED" in shown.stdout and "full" in shown.stdout, shown.stdout

        filler.unlink()  # space returns
        wait_for(lambda: len(read_output(out)) >= expected + 1 if out.exists() else False, 90,
                   "every entry in the output once space returned")
        wait_for(lambda: (status_json(tmp_path).get("delivery") or {}).get("state") == "ok", 30, "delivery ok")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        log.close()
    entries = read_output(out)
    assert_no_duplicates(entries)
    assert len([e for e in entries if e["event.name"] != "session.status"]) == expected
    with sqlite3.connect(store) as db:
        stored = {row[0] for row in db.execute("SELECT event_id FROM events")}
    assert stored == {e["event.id"] for e in entries}
