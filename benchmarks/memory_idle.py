#!/usr/bin/env python3
"""Bounded memory and an idle daemon (issue 29 points 4 and 5), the real CLI as a subprocess.

``--rss``: peak RSS (``ru_maxrss`` of the child, from ``wait4``) of ``collect --once`` over 400 MB of the
five agents mixed and over 20,000 small Claude Code transcripts (``benchmarks/_corpora.py``), next to the
floor of the same run: a bare interpreter that imported orjson. Goal: <= 150 MB.

``--idle``: CPU of ``agent-collector run`` (defaults, but the ingest on a free port) once its first full
pass is over, on two homes: 20,000 small Claude Code transcripts, and every agent's fixture data (every
case of every agent in ``tests/fixtures``, OpenCode's and Kilo Code's WAL databases included). The window
starts when ``status.json`` says ``caught_up`` (a whole cycle read nothing new, file events are delivered
and no full pass is due), not after a fixed sleep; its figure is the daemon's utime + stime from
``/proc/<pid>/stat`` over the window divided by the window, as a share of one core. Goal: < 1 %.

    nice -n 10 .venv/bin/python benchmarks/memory_idle.py --rss
    nice -n 10 .venv/bin/python benchmarks/memory_idle.py --idle --seconds 60

Either stops with an error, printing no figure, when a run fails, writes no entry, or the daemon dies.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _corpora  # noqa: E402
import peers  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")
RSS_GOAL_MB = 150.0
IDLE_GOAL = 1.0  # % of one core
CATCH_UP_LIMIT_S = 1800.0


def rss(args: argparse.Namespace, tmp: Path) -> None:
    bare = peers.checked(peers.run([sys.executable, "-c", "import orjson"], {"PATH": os.environ.get("PATH", "")}),
                         "the bare interpreter")
    print(f"floor: a bare interpreter with orjson imported, peak RSS {bare.rss_mb:.0f} MB")
    print("| corpus | MB | sessions | entries | CPU s | peak RSS | x floor | goal |")
    print("|---|---|---|---|---|---|---|---|")
    for name in ("mixed", "small"):
        home = tmp / name / "home"
        corpus = (_corpora.build_mixed(home, args.mixed_mb) if name == "mixed"
                  else _corpora.build_small(home, args.small))
        ours, entries = peers.collector(home, tmp / name / "work")
        verdict = "met" if ours.rss_mb <= RSS_GOAL_MB else "**not met**"
        print(f"| {peers.TITLES[name]} | {corpus.mb:.0f} | {corpus.sessions:,} | {entries:,} | {ours.cpu_s:.2f} | "
              f"**{ours.rss_mb:.0f} MB** | {ours.rss_mb / bare.rss_mb:.1f}x | <= {RSS_GOAL_MB:.0f} MB: {verdict} |",
              flush=True)
        shutil.rmtree(tmp / name, ignore_errors=True)


def every_agent(home: Path, spool: Path) -> int:
    """Every case of every agent in tests/fixtures: its home and spool files, the first case's file where
    two cases hold the same path (a database and its -wal/-shm always from one case). Returns the cases."""
    cases = sorted(p.parent for p in _corpora.FIXTURES.glob("*/*/expected.json"))
    owner: dict[Path, Path] = {}  # a file (a database's -wal and -shm under the database's name) -> its case
    for case in cases:
        for part, into in (("home", home), ("spool", spool)):
            root = case / part
            for src in sorted(p for p in root.rglob("*") if not p.is_dir()) if root.is_dir() else []:
                dest = into / src.relative_to(root)
                key = Path(str(dest).removesuffix("-wal").removesuffix("-shm"))
                if owner.setdefault(key, case) != case:
                    continue
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest, follow_symlinks=False)
    return len(cases)


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def status_of(path: Path) -> dict[str, object]:
    with contextlib.suppress(FileNotFoundError, ValueError):
        found = json.loads(path.read_bytes())
        return found if isinstance(found, dict) else {}
    return {}


def idle(args: argparse.Namespace, tmp: Path) -> None:
    print(f"| home | files | entries written | backfill CPU s | idle window | idle CPU s | % of a core | "
          f"goal < {IDLE_GOAL:g} % |")
    print("|---|---|---|---|---|---|---|---|")
    for name in ("small", "every"):
        root = tmp / name
        home, data, out = root / "home", root / "data", root / "out"
        home.mkdir(parents=True)
        if name == "small":
            title = f"{args.small:,} small Claude Code transcripts"
            _corpora.build_small(home, args.small)
        else:
            title = f"every agent's fixture data ({every_agent(home, data / 'spool')} cases)"
        files = sum(1 for p in home.rglob("*") if p.is_file()) + sum(1 for p in (data / "spool").rglob("*")
                                                                   if p.is_file())
        figure = watch_idle(root, home, data, out, args.seconds)
        verdict = "met" if figure[3] < IDLE_GOAL else "**not met**"
        print(f"| {title} | {files:,} | {figure[0]:,} | {figure[1]:.1f} | {args.seconds:.0f} s | {figure[2]:.2f} | "
              f"**{figure[3]:.2f} %** | {verdict} |", flush=True)
        shutil.rmtree(root, ignore_errors=True)


def watch_idle(root: Path, home: Path, data: Path, out: Path, seconds: float) -> tuple[int, float, float, float]:
    """(entries written, CPU s until caught up, CPU s over the window, % of a core) of one daemon."""
    env = {**peers.peer_env(home), "PYTHONPATH": str(ROOT), "AGENT_COLLECTOR_DATA_DIR": str(data),
           "AGENT_COLLECTOR_CONFIG_DIR": str(root / "cfg"), "AGENT_COLLECTOR_INGEST__PORT": str(free_port())}
    log = root / "daemon.log"
    with log.open("wb") as err:
        daemon = subprocess.Popen([sys.executable, "-m", "collector", "run", "--home", str(home), "--output",
                                   str(out)], env=env, stderr=err, stdout=subprocess.DEVNULL,
                                  stdin=subprocess.DEVNULL)
    try:
        status = data / "state" / "status.json"
        deadline = time.monotonic() + CATCH_UP_LIMIT_S
        while not status_of(status).get("caught_up"):
            if daemon.poll() is not None:
                raise peers.Failed("agent-collector run", f"exited {daemon.returncode}: {tail(log)}")
            if time.monotonic() > deadline:
                raise peers.Failed("agent-collector run", f"not caught up after {CATCH_UP_LIMIT_S:.0f} s")
            time.sleep(0.5)
        backfill = cpu_s(daemon.pid)
        time.sleep(seconds)
        used = cpu_s(daemon.pid) - backfill
        if daemon.poll() is not None:
            raise peers.Failed("agent-collector run", f"died in the idle window: {tail(log)}")
    finally:
        daemon.terminate()
        daemon.wait(30)
    entries = sum(p.read_bytes().count(b"\n") for p in out.glob("*.jsonl"))
    if entries == 0:
        raise peers.Failed("agent-collector run", "caught up but wrote no entry")
    return entries, backfill, used, 100 * used / seconds


def tail(log: Path) -> str:
    lines = log.read_bytes().decode(errors="replace").strip().splitlines()
    return lines[-1][:200] if lines else "no log line"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rss", action="store_true", help="peak RSS of collect --once (the default)")
    ap.add_argument("--idle", action="store_true", help="idle CPU of a running daemon")
    ap.add_argument("--mixed-mb", type=float, default=400)
    ap.add_argument("--small", type=int, default=20000, help="number of small transcripts")
    ap.add_argument("--seconds", type=float, default=60.0, help="the idle window")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="memory-idle-") as tmp:
        if args.rss or not args.idle:
            rss(args, Path(tmp))
        if args.idle:
            idle(args, Path(tmp))
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
