"""`collect --once` while `agent-collector run` is up on the same data: the daemon does the work (it alone
writes checkpoints and output), the command waits and reports, and every entry of the backfill is in the
output exactly once, as many as a lone `collect --once` of the same history writes. The progress line
on a terminal shows percent and ETA."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import FIXTURES, ROOT, collect, make_paths, read_output
from support.processes import stop_gently

from collector.daemon.backfill import Meter, ProgressState, render
from collector.sources.base import SourceStats

CASES = sorted(p for agent in ("claude-code", "codex", "gemini-cli") for p in (FIXTURES / agent).iterdir()
               if p.is_dir())


def backfill(home: Path, spool: Path) -> None:
    """Real captures of three agents, 13 sessions: their homes merged, each case's spool its own day."""
    for day, case in enumerate(CASES, start=1):
        if (case / "home").is_dir():
            shutil.copytree(case / "home", home, symlinks=True, dirs_exist_ok=True)
        for src in (case / "spool").glob("*/*.jsonl") if (case / "spool").is_dir() else []:
            agent = src.parent.name
            (spool / agent).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, spool / agent / f"{agent}-2026-10-{day:02d}.jsonl")


def facts(entries: list[dict[str, object]]) -> Counter[tuple[object, ...]]:
    return Counter((e["gen_ai.agent.type"], e["event.name"], e.get("gen_ai.session.id"), e.get("gen_ai.tool.call.id"))
                   for e in entries)


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_COLLECTOR_", "XDG_"))}
    env.update(HOME=str(home), AGENT_COLLECTOR_INGEST__ENABLED="false", AGENT_COLLECTOR_WATCHDOG__ENABLED="false")
    return env


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    home = tmp_path / "home"
    home.mkdir()
    log = (tmp_path / "daemon.log").open("wb")  # a pipe nobody reads would fill and block the daemon's logging
    proc = subprocess.Popen([sys.executable, "-m", "collector", "run", "--home", str(home)], cwd=ROOT,
                            env=environment(home), stdout=subprocess.DEVNULL, stderr=log)
    lock = home / ".local" / "share" / "agent-collector" / "state" / "collector.lock"
    deadline = time.monotonic() + 30
    while not (lock.exists() and lock.read_text().strip() == str(proc.pid)):
        assert proc.poll() is None and time.monotonic() < deadline, "the daemon did not start"
        time.sleep(0.1)
    yield home, proc
    try:
        stop_gently(proc)
    finally:
        log.close()


@pytest.mark.timeout(180)
def test_collect_once_beside_the_daemon_writes_every_entry_once(
    tmp_path: Path, daemon: tuple[Path, subprocess.Popen[bytes]]
) -> None:
    home, proc = daemon
    data = home / ".local" / "share" / "agent-collector"
    backfill(home, data / "spool")  # old history arrives while the daemon runs
    result = subprocess.run([sys.executable, "-m", "collector", "collect", "--once", "--home", str(home)],
                            cwd=ROOT, env=environment(home), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"a daemon is running on {data} (pid {proc.pid}): it collects, this waits" in result.stderr
    assert f"by the daemon, pid {proc.pid}" in result.stderr
    again = subprocess.run([sys.executable, "-m", "collector", "collect", "--once", "--home", str(home)],
                           cwd=ROOT, env=environment(home), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "collected 0 entries from 0 records" in again.stderr
    assert proc.poll() is None
    assert not list((data / "state" / "requests").iterdir()), "every request answered and cleaned up"

    entries = read_output(data / "output")
    ids = Counter(e["event.id"] for e in entries)
    assert not [i for i, n in ids.items() if n > 1], "an entry was written twice"

    alone = make_paths(tmp_path / "alone")
    alone.home.mkdir(parents=True)
    backfill(alone.home, alone.spool_dir)
    reference = collect(alone)
    assert len(reference) > 150 and len({e.get("gen_ai.session.id") for e in reference}) >= 10
    assert facts(entries) == facts(reference), "not the same entries as a lone collect --once"


def test_output_elsewhere_is_refused_while_the_daemon_runs(
    tmp_path: Path, daemon: tuple[Path, subprocess.Popen[bytes]]
) -> None:
    home, proc = daemon
    result = subprocess.run([sys.executable, "-m", "collector", "collect", "--once", "--home", str(home),
                             "--output", str(tmp_path / "elsewhere")], cwd=ROOT, env=environment(home),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and f"the running daemon (pid {proc.pid}) writes to" in result.stderr
    assert not (tmp_path / "elsewhere").exists()


def test_the_progress_line_on_a_terminal_shows_percent_and_eta(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    paths.home.mkdir(parents=True)
    backfill(paths.home, paths.spool_dir)
    env = {**environment(paths.home), "AGENT_COLLECTOR_DATA_DIR": str(paths.data_dir),
           "AGENT_COLLECTOR_CONFIG_DIR": str(paths.config_dir), "AGENT_COLLECTOR_COLLECTOR__BATCH_SIZE": "50"}
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "collector", "collect", "--once", "--home", str(paths.home)],
                            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    out = b""
    with contextlib.suppress(OSError):  # EIO once the child closed the terminal
        while proc.poll() is None or select.select([master], [], [], 0.2)[0]:
            if select.select([master], [], [], 0.2)[0]:
                chunk = os.read(master, 65536)
                if not chunk:
                    break
                out += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0
    text = out.decode(errors="replace")
    assert "% " in text and " of " in text and "ETA " in text and " records" in text, text
    assert "collected " in text


class _FakeSource:
    def __init__(self, pending: int) -> None:
        self.name, self.agent, self.stats, self._pending = "fake", "x", SourceStats(), pending

    def pending_bytes(self) -> int:
        return self._pending


def test_meter_percent_and_eta_from_bytes_read() -> None:
    source = _FakeSource(4 << 20)
    now = [100.0]
    seen: list[ProgressState] = []
    meter = Meter([source], seen.append, clock=lambda: now[0])  # type: ignore[list-item]
    source.stats.bytes, now[0] = 1 << 20, 110.0
    meter("claude-code:transcripts", 500)
    state = seen[-1]
    assert (state.done_bytes, state.total_bytes, state.records) == (1 << 20, 4 << 20, 500)
    assert state.fraction == 0.25 and state.eta_s == pytest.approx(30.0)
    assert render(state) == " 25%  1.0 MB of 4.0 MB  500 records  ETA 0:30  claude-code:transcripts"
    assert render(ProgressState(7, 0, 0, 1.0, "opencode:db")) == "         7 records  opencode:db"


def test_a_daemon_that_never_takes_the_request_or_dies_is_an_error(tmp_path: Path) -> None:
    from collector.daemon import handoff

    token = handoff.request(tmp_path)
    with pytest.raises(handoff.HandoffError, match="did not take the request within 0s"):
        handoff.wait(tmp_path, token, lambda: True, accept_within_s=0.2, poll_s=0.05)
    token = handoff.request(tmp_path)
    with pytest.raises(handoff.HandoffError, match="stopped before it finished"):
        handoff.wait(tmp_path, token, lambda: False, accept_within_s=60, poll_s=0.05)
    assert not list(handoff.requests_dir(tmp_path).iterdir()), "the client cleans up after itself"


def test_the_desk_answers_waiting_requests_only(tmp_path: Path) -> None:
    from collector.daemon import handoff

    desk = handoff.RequestDesk(tmp_path)
    waiting, abandoned = handoff.request(tmp_path), handoff.request(tmp_path)
    taken = desk.take()
    assert taken == sorted([waiting, abandoned])
    desk.meter(taken, [_FakeSource(100)])  # type: ignore[list-item]
    (handoff.requests_dir(tmp_path) / f"{abandoned}.request").unlink()  # its client gave up
    desk.finish(taken, 7, 5, {"codex": 5})
    folder = handoff.requests_dir(tmp_path)
    assert (folder / f"{waiting}.done").exists() and not (folder / f"{abandoned}.done").exists()
    result = handoff.wait(tmp_path, waiting, lambda: True, accept_within_s=1)
    assert (result.records, result.entries, result.by_agent) == (7, 5, {"codex": 5})
    stale = folder / f"{abandoned}.progress"
    assert stale.exists()
    desk.take()
    assert stale.exists(), "a fresh answer may still be read"
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    desk.take()
    assert not list(folder.iterdir()), "an hour-old answer nobody waits for is swept"
