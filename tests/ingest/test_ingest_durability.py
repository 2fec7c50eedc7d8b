"""25 `kill -9` of the real daemon at random points during a 100,000-hook ingest, half over HTTP and half
appended to the spool files as the hook script does: every hook that got a 200 (or whose line was
appended) is in the JSONL output exactly once, 0 lost, 0 duplicated.

Six threads post Claude Code PreToolUse hooks over kept-alive connections the whole time; a seventh
appends hook lines to the spool day file (every 100th through the real hook script, the rest as direct
one-write appends of the same line), paced to the HTTP side. The daemon is started again after each kill;
most kills land when the acknowledged count passes a random mark, some at a random moment of start-up.
After the last kill a final daemon ingests the rest and catches up; then every id is counted in the
output. The seed is in every failure message (AGENT_COLLECTOR_CRASH_SEED replays one)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
from support.hook_posting import HookClient, post_hooks, pre_tool_use
from support.robust import Daemon

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "hooks" / "agent-collector-hook.sh"
N_HTTP = 50_000
N_FILE = 50_000
KILLS = 25
SENDERS = 6
SCRIPT_EVERY = 100  # every 100th file hook goes through the real hook script

pytestmark = pytest.mark.slow  # about 2-4 minutes; the CI (.ci/run) runs the whole suite, slow included


class Acks:
    """What the producers were told was durable (a 200, or an append that returned)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: list[str] = []
        self.http_done = 0  # hooks the senders are through with, answered or not
        self.refused = 0  # answered other than 200, or failed in flight

    def answer(self, key: str, status: int | None, _ms: float) -> None:
        with self.lock:
            self.http_done += 1
            if status == 200:
                self.acked.append(key)
            else:
                self.refused += 1

    def appended(self, key: str) -> None:
        with self.lock:
            self.acked.append(key)

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


def _sessions(n: int) -> list[str]:
    return [f"0b8f1c1e-0000-4000-8000-{i:012d}" for i in range(n)]


def _http_hooks(sender: int, session: str) -> list[tuple[str, bytes]]:
    keys = [f"toolu_h{n:06d}" for n in range(sender, N_HTTP, SENDERS)]
    return [(key, pre_tool_use(session, key, f"echo {key}")) for key in keys]


def _file_line(session: str, key: str) -> bytes:
    payload = {"session_id": session, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": key,
               "tool_input": {"command": f"echo {key}"}}
    return orjson.dumps({"ts": time.time(), "agent": "claude-code", "event": "PreToolUse", "payload": payload}) + b"\n"


def _append_files(daemon: Daemon, acks: Acks, session: str, stop: threading.Event, errors: list[str]) -> None:
    spool = daemon.data / "spool"
    agent_dir = spool / "claude-code"
    agent_dir.mkdir(parents=True, exist_ok=True)
    hook_env = {k: v for k, v in daemon.env.items() if not k.startswith("AGENT_COLLECTOR_")}
    for n in range(N_FILE):
        key = f"toolu_f{n:06d}"
        while n > acks.http_done + 200 and acks.http_done < N_HTTP and not stop.is_set():  # keep pace
            time.sleep(0.002)
        if stop.is_set():
            return
        if n % SCRIPT_EVERY == 0:
            payload = pre_tool_use(session, key, f"echo {key}")
            done = subprocess.run(["bash", str(HOOK), "claude-code", "PreToolUse", str(spool)], input=payload,
                                  env=hook_env, timeout=30, check=False)
            if done.returncode != 0:
                errors.append(f"hook script exited {done.returncode}")
        else:
            day = time.strftime("%Y-%m-%d", time.gmtime())
            fd = os.open(agent_dir / f"claude-code-{day}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                line = _file_line(session, key)
                if os.write(fd, line) != len(line):
                    errors.append(f"short write of {key}")
            finally:
                os.close(fd)
        acks.appended(key)


def _kill_at(daemon: Daemon, acks: Acks, mark: int | None, delay: float, producers_done: threading.Event) -> str:
    """Kill the running daemon when ``acks`` passes ``mark`` (or ``delay`` s after its start when None)."""
    assert daemon.proc is not None
    started = time.monotonic()
    if mark is None:
        time.sleep(delay)
        where = f"{delay:.2f} s after start"
    else:
        deadline = started + 120
        while acks.count() < mark and not producers_done.is_set():
            assert time.monotonic() < deadline, f"no progress to {mark} acks ({acks.count()}): {daemon.log()[-2000:]}"
            assert daemon.proc.poll() is None, "the daemon died by itself: " + daemon.log()[-3000:]
            time.sleep(0.002)
        where = f"at {acks.count()} acks"
    assert daemon.proc.poll() is None, "the daemon died by itself: " + daemon.log()[-3000:]
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait(10)
    return where


def _output_ids(daemon: Daemon) -> Counter[str]:
    ids: Counter[str] = Counter()
    for path in sorted(daemon.out.glob("activity-*.jsonl")):
        for line in path.read_bytes().splitlines():
            if line.strip():
                entry = orjson.loads(line)  # a torn line fails here
                if entry.get("event.name") == "tool.call":
                    ids[entry["gen_ai.tool.call.id"]] += 1
    return ids


def _wait_caught_up(daemon: Daemon, acked: set[str], seed: int, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert daemon.proc is not None and daemon.proc.poll() is None, "the final daemon died: " + daemon.log()[-3000:]
        missing = acked - set(_output_ids(daemon))
        if not missing:
            return
        assert time.monotonic() < deadline, (f"seed {seed}: {len(missing)} acknowledged hooks never reached the "
                                             f"output: {_where(daemon, sorted(missing)[:5])}")
        time.sleep(1.0)


def _where(daemon: Daemon, keys: list[str]) -> str:
    """Where the missing keys are on disk (spool files, quarantine), for the failure message."""
    found: list[str] = []
    for key in keys:
        places = [f"{path.relative_to(daemon.data)}@{data.find(key.encode())}/{len(data)}"
                  for path in sorted(daemon.data.rglob("*")) if path.is_file() and path.stat().st_size < 200 << 20
                  for data in [path.read_bytes()] if key.encode() in data]
        found.append(f"{key} in {places or 'nothing'}")
    return "; ".join(found) + "\n" + daemon.log()[-3000:]


def test_25_kill_9_during_100k_hooks_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    seed = int(os.environ.get("AGENT_COLLECTOR_CRASH_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    daemon = Daemon(tmp_path, {"AGENT_COLLECTOR_COLLECTOR__POLL_INTERVAL_S": "0.5"})
    sessions = _sessions(SENDERS + 1)
    acks = Acks()
    stop = threading.Event()
    producers_done = threading.Event()
    errors: list[str] = []
    total = N_HTTP + N_FILE
    marks = sorted(rng.sample(range(total // 50, total - total // 20), KILLS))
    at_start = set(rng.sample(range(KILLS), 4))  # these rounds die during start-up instead
    kills: list[str] = []
    daemon.start()
    token = (daemon.data / "state" / "ingest.token").read_text().strip()
    clients = [HookClient(daemon.port, token, keep_alive=True, timeout=10) for _ in range(SENDERS)]
    threads = [threading.Thread(target=post_hooks, args=(clients[i], _http_hooks(i, sessions[i]), acks.answer, stop),
                                daemon=True) for i in range(SENDERS)]
    threads.append(threading.Thread(target=_append_files, args=(daemon, acks, sessions[-1], stop, errors),
                                    daemon=True))
    watcher = threading.Thread(target=lambda: ([t.join() for t in threads], producers_done.set()), daemon=True)
    try:
        for thread in threads:
            thread.start()
        watcher.start()
        for round_ in range(KILLS):
            if round_ in at_start:
                kills.append(_kill_at(daemon, acks, None, rng.uniform(0.05, 1.5), producers_done))
            else:
                kills.append(_kill_at(daemon, acks, marks[round_], 0.0, producers_done))
            daemon.spawn()
        daemon.wait_ready()
        assert producers_done.wait(240), f"seed {seed}: the producers did not finish (at {acks.count()} acks)"
        acked = set(acks.acked)
        assert not errors, errors
        assert len(acked) == len(acks.acked), "every key was acknowledged once"
        _wait_caught_up(daemon, acked, seed)
        assert daemon.stop() == 0
    finally:
        stop.set()
        for client in clients:
            client.close()
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.proc.kill()
            daemon.proc.wait(10)
    ids = _output_ids(daemon)
    lost = acked - set(ids)
    duplicated = {key: n for key, n in ids.items() if n > 1}
    context = f"seed {seed}; kills: {', '.join(kills)}"
    assert len(kills) == KILLS
    assert not lost, f"{len(lost)} acknowledged hooks lost ({sorted(lost)[:5]}); {context}"
    assert not duplicated, f"{len(duplicated)} hooks in the output more than once; {context}"
    # only the hooks in flight at a kill (and the next one on each dead kept-alive connection) go unanswered
    assert acks.refused <= 3 * SENDERS * KILLS, f"{acks.refused} of {N_HTTP} posts not answered 200; {context}"
    assert sum(k.startswith("toolu_f") for k in acked) == N_FILE
    print(f"seed {seed}: {len(acked)} of {total} hooks acknowledged ({acks.refused} cut by a kill), "
          f"{len(ids)} in the output, 0 lost, 0 duplicated; kills: {', '.join(kills)}")
