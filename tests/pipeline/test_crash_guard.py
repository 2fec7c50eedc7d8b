"""A record that kills the process (a segfault or abort in a C extension, the OOM killer) is quarantined at
the next start instead of killing it again; its neighbours are all in the output exactly once.

The real daemon is made to die on one hook line with AGENT_COLLECTOR_TEST_DIE_ON (``os.abort()``, a fatal
signal faulthandler reports; or SIGKILL to itself, which says nothing and so needs a second death on the
same record)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from support import assert_no_duplicates, read_output
from support.robust import Daemon

from collector.model.raw import RawRecord
from collector.pipeline.crash_guard import CrashGuard, read_verdict

SESSION = "0b8f1c1e-0000-4000-8000-0000000000c9"
POISON = "poison-7f3a-record"
N = 300


def write_spool(spool: Path) -> None:
    spool.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(N):
        command = f"echo {POISON}" if i == 123 else f"echo {i}"
        payload = {"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                   "tool_use_id": f"toolu_{i:06d}", "tool_input": {"command": command}}
        lines.append({"ts": 1796037001.0 + i / 100, "agent": "claude-code", "event": "PreToolUse", "payload": payload})
    (spool / "claude-code-2026-11-30.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def run_until_exit(daemon: Daemon, timeout: float = 60) -> int:
    daemon.spawn()
    assert daemon.proc is not None
    return daemon.proc.wait(timeout)


@pytest.mark.parametrize(("how", "deaths", "code"), [("abort", 1, -signal.SIGABRT), ("kill", 3, -signal.SIGKILL)])
def test_a_record_the_daemon_died_on_is_quarantined_at_the_next_start(tmp_path: Path, how: str, deaths: int,
                                                                      code: int) -> None:
    daemon = Daemon(tmp_path, {"AGENT_COLLECTOR_TEST_DIE_ON": f"{how}:{POISON}", "AGENT_COLLECTOR_INGEST__ENABLED":
                               "false"})
    write_spool(daemon.data / "spool" / "claude-code")
    for death in range(deaths):
        assert run_until_exit(daemon) == code, f"death {death + 1}: " + daemon.log()[-3000:]
    if how == "abort":
        assert "os.abort" in (daemon.data / "state" / "fault.log").read_text() or \
            "Fatal Python error" in (daemon.data / "state" / "fault.log").read_text()
    daemon.start_quiet()
    try:
        entries = daemon.wait_output(lambda es: len([e for e in es if e["event.name"] == "tool.call"]) >= N - 1, 60)
        assert daemon.proc is not None and daemon.proc.poll() is None, "alive with the record in its input"
        status = daemon.status_file()
    finally:
        assert daemon.stop() == 0
    entries = read_output(daemon.out)
    assert_no_duplicates(entries)
    calls = {e["gen_ai.tool.call.id"] for e in entries if e["event.name"] == "tool.call"}
    assert calls == {f"toolu_{i:06d}" for i in range(N) if i != 123}
    quarantined = [json.loads(line) for line in
                   (daemon.data / "quarantine" / "quarantine.jsonl").read_text().splitlines()]
    assert [(q["stage"], q["path"].endswith("claude-code-2026-11-30.jsonl")) for q in quarantined] == [("crash", True)]
    assert "died while processing it" in json.dumps(status["quarantine"])
    assert "quarantined when read again" in daemon.log()


def _record(position: str) -> RawRecord:
    return RawRecord("claude-code", "hook", {"x": position}, "stream-1", position, 0)


def test_one_kill_without_a_fatal_signal_costs_no_record(tmp_path: Path) -> None:
    """A user's `kill -9` (or any SIGKILL) mid-record makes the record a suspect, processed again; two such
    kills cost nothing, the third death on it condemns it. A fatal signal condemns it at once."""
    guard = CrashGuard(tmp_path, env={})
    guard.enter(_record("10"))  # the process dies here (nothing clears the name)
    guard.close()
    assert read_verdict(tmp_path).key == b"stream-1\x1f10"
    again = CrashGuard(tmp_path, env={})
    assert not again.condemned(_record("10")), "one silent death: processed again"
    again.enter(_record("10"))  # and dies on it once more
    again.close()
    twice = CrashGuard(tmp_path, env={})
    assert not twice.condemned(_record("10")), "two silent deaths (a kill at start-up): processed again"
    twice.enter(_record("10"))  # the third death
    twice.close()
    third = CrashGuard(tmp_path, env={})
    assert third.condemned(_record("10")) and not third.condemned(_record("10")), "condemned once, then retried"
    third.enter(_record("11"))
    third.clear()  # a batch that went through leaves no name
    third.close()
    assert read_verdict(tmp_path).key is None
    (tmp_path / "fault.log").write_text("Fatal Python error: Segmentation fault\n")
    fourth = CrashGuard(tmp_path, env={})
    fourth.enter(_record("12"))
    fourth.close()
    assert CrashGuard(tmp_path, env={}).condemned(_record("12")), "a fatal signal: condemned at the first death"
