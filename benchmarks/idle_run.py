"""CPU of an idle daemon: the real `agent-collector run` on a home that holds data, measured once the
backfill is done, over N seconds with nothing written (CPU seconds of the daemon process from
/proc/<pid>/stat, utime + stime: the machine is shared, so wall time would say little).

    .venv/bin/python benchmarks/idle_run.py --corpus five --seconds 60
    .venv/bin/python benchmarks/idle_run.py --corpus files --files 20000 --seconds 60

Corpora: ``five``: every agent's fixture session side by side (Claude Code, Codex, Gemini CLI, Qwen Code
transcripts and spools, OpenCode's SQLite database in WAL mode); ``files``: that plus N small Claude Code
transcripts (the real fixture's first lines, fresh ids). Also prints how often status.json was rewritten
and how many log lines the daemon wrote while idle.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
AGENTS = ("claude-code", "codex", "gemini-cli", "opencode", "qwen-code")
TICK = os.sysconf("SC_CLK_TCK")


def build_five(home: Path, spool: Path) -> None:
    for agent in AGENTS:
        case = FIXTURES / agent / "tool_then_answer"
        if (case / "home").exists():
            shutil.copytree(case / "home", home, symlinks=True, dirs_exist_ok=True)
        if (case / "spool").exists():
            shutil.copytree(case / "spool", spool, dirs_exist_ok=True)


def build_files(home: Path, count: int) -> None:
    template = next((FIXTURES / "claude-code" / "two_turns_resume").glob("home/.claude/projects/*/*.jsonl"))
    lines = template.read_text().splitlines()[:6]
    session = json.loads(lines[0]).get("sessionId") or "none"
    for n in range(count):
        folder = home / ".claude" / "projects" / f"-tmp-idle-{n // 500:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        sid = str(uuid.uuid4())
        (folder / f"{sid}.jsonl").write_text("\n".join(x.replace(session, sid) for x in lines) + "\n")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", choices=("five", "files"), default="five")
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--seconds", type=float, default=60.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home, data, out = Path(tmp) / "home", Path(tmp) / "data", Path(tmp) / "out"
        home.mkdir()
        build_five(home, data / "spool")
        if args.corpus == "files":
            build_files(home, args.files)
        env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / ".local" / "share"),
               "XDG_CONFIG_HOME": str(home / ".config"), "XDG_STATE_HOME": str(home / ".local" / "state"),
               "AGENT_COLLECTOR_DATA_DIR": str(data), "AGENT_COLLECTOR_CONFIG_DIR": f"{tmp}/cfg",
               "AGENT_COLLECTOR_INGEST__ENABLED": "false", "AGENT_COLLECTOR_WATCHDOG__ENABLED": "false"}
        log = Path(tmp) / "daemon.log"
        with log.open("wb") as err:
            daemon = subprocess.Popen([sys.executable, "-m", "collector", "run", "--home", str(home),
                                       "--output", str(out)], env=env, stderr=err, stdout=subprocess.DEVNULL)
        try:
            backfill = settle(daemon.pid)
            status = data / "state" / "status.json"
            lines_before = len(log.read_bytes().splitlines())
            inodes = set()
            start = cpu_s(daemon.pid)
            end_at = time.monotonic() + args.seconds
            while time.monotonic() < end_at:
                time.sleep(0.2)
                with contextlib.suppress(FileNotFoundError):
                    inodes.add(status.stat().st_ino)
            idle = cpu_s(daemon.pid) - start
            idle_lines = log.read_bytes().splitlines()[lines_before:]
        finally:
            daemon.terminate()
            daemon.wait(30)
        entries = sum(1 for p in out.glob("activity-*.jsonl") for _ in p.open("rb"))
    print(f"corpus {args.corpus}: {entries} entries written; backfill {backfill:.1f} CPU s")
    print(f"idle {args.seconds:.0f} s: {idle:.2f} CPU s = {100 * idle / args.seconds:.2f} % of a core; "
          f"status.json rewritten {max(0, len(inodes) - 1)} times; {len(idle_lines)} log lines")
    for line in idle_lines[:5]:
        print("  log:", line.decode(errors="replace")[:160])


def settle(pid: int, window: int = 10, share: float = 0.10) -> float:
    """Wait until the daemon used under ``share`` of a core on average over the last ``window`` seconds
    (the backfill is over). An average, not every second: an idle cycle that costs more than 0.1 CPU s
    now and then (a sweep) must not keep the benchmark waiting for ever."""
    samples = [cpu_s(pid)]
    while len(samples) <= window or samples[-1] - samples[-1 - window] >= share * window:
        time.sleep(1)
        samples.append(cpu_s(pid))
    return samples[-1] - samples[0]


if __name__ == "__main__":
    main()
