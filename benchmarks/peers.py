#!/usr/bin/env python3
"""Backfill CPU of agent-collector next to the parse floor and two peers, on three corpora built from the
real fixture sessions (benchmarks/_corpora.py), all in one run:

- agent-collector: `collect --once` over the corpus home (defaults: masking on, content capture off);
- orjson floor: `orjson.loads` of every line of the same files (and of every `data` column of OpenCode's
  session, message and part rows), in a process of its own;
- agentsview 0.46.1 `sync` (one-shot, no daemon), HOME pointed at the corpus home;
- ccusage 20.0.24 `daily --offline --json` (tokens only), HOME pointed at the corpus home.

CPU seconds (user + system, from wait4 of each process: start-up included) are the figure: the machine is
shared, so wall time would measure the neighbours. Ratios are to the floor measured in the same run.

    .venv/bin/python benchmarks/peers.py [--install-peers] [--only claude --only mixed --only small]
    .venv/bin/python benchmarks/peers.py --scale        # linearity in MB and in sessions, peak RSS
    .venv/bin/python benchmarks/peers.py --alone        # each agent of the mixed corpus alone: same ids?

Peers are installed into .cache/peers with --install-peers (npm and pip with their caches and HOME inside
.cache); a peer that is not installed (or cannot be, offline) is reported as such and skipped.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _corpora  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / ".cache" / "peers"
CCUSAGE_VERSION = "20.0.24"
AGENTSVIEW_VERSION = "0.46.1"
CCUSAGE = PEERS / "ccusage" / "node_modules" / "ccusage" / "src" / "cli.js"
AGENTSVIEW = PEERS / "agentsview-venv" / "bin" / "agentsview"


@dataclass
class Run:
    cpu_s: float
    rss_mb: float
    ok: bool
    note: str = ""
    out: str = ""


class Failed(SystemExit):
    """A timed helper failed or did not do its work: the benchmark stops, no figure is printed."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"benchmark stopped: {what}: {why}")


def run(cmd: list[str], env: dict[str, str], timeout: float = 1800) -> Run:
    """CPU seconds and peak RSS of one process (and the children it waited for), from wait4; its stdout."""
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read().decode(errors="replace").strip().splitlines()[-1:] if proc.returncode else []
        out.seek(0)
        printed = out.read(1 << 20).decode(errors="replace")
    note = tail[0][:200] if tail else (f"exit status {proc.returncode}" if proc.returncode else "")
    return Run(usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode == 0, note, printed)


def checked(result: Run, what: str) -> Run:
    """``result`` if its process exited 0, else the benchmark stops (:class:`Failed`)."""
    if not result.ok:
        raise Failed(what, result.note or "failed")
    return result


def peer_env(home: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")}
    return {**keep, "HOME": str(home), "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_CONFIG_HOME": str(home / ".config"), "XDG_STATE_HOME": str(home / ".local" / "state"),
            "XDG_CACHE_HOME": str(home / ".cache"), "TZ": "UTC"}


def floor(corpus: _corpora.Corpus) -> Run:
    """The parse floor's run, checked: exit 0, every byte of the corpus files read, (nearly) every line
    decoded, every row of OpenCode's tables read and at least one JSON value decoded per message and part
    row; otherwise the benchmark stops."""
    files, databases = corpus.files(), corpus.databases()
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as listing:
        listing.write("\n".join(str(p) for p in files + databases))
        listing.flush()
        result = checked(run([sys.executable, str(Path(__file__).resolve().parent / "_floor.py"), listing.name],
                             {"PATH": os.environ.get("PATH", "")}), "the parse floor (_floor.py)")
    try:
        done = orjson.loads(result.out)
    except orjson.JSONDecodeError:
        raise Failed("the parse floor (_floor.py)", f"printed no count: {result.out[:200]!r}") from None
    wanted = sum(p.stat().st_size for p in files)
    rows = {t: n for db in databases for t, n in table_rows(db).items()}
    problems = floor_problems(done, wanted, rows)
    if problems:
        raise Failed("the parse floor (_floor.py) did not do the work", "; ".join(problems))
    return result


def table_rows(db: Path) -> dict[str, int]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {t: int(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in _corpora.OPENCODE_TABLES}
    finally:
        con.close()


def floor_problems(done: dict[str, int], file_bytes: int, rows: dict[str, int]) -> list[str]:
    """What the floor's count says it left undone: bytes of the files not read, lines that did not decode
    (more than 1 %: the fixtures hold a few torn lines on purpose), rows not read, message and part rows
    without a decoded JSON value, a JSON column that did not decode."""
    problems = []
    if done["file_bytes"] != file_bytes:
        problems.append(f"read {done['file_bytes']:,} bytes of files, the corpus has {file_bytes:,}")
    if file_bytes and (done["lines"] == 0 or done["bad_lines"] > done["lines"] / 100):
        problems.append(f"decoded {done['lines']:,} lines, {done['bad_lines']:,} did not decode")
    if done["rows"] != sum(rows.values()):
        problems.append(f"read {done['rows']:,} rows, the database has {sum(rows.values()):,}")
    if done["values"] < rows.get("message", 0) + rows.get("part", 0) or done["bad_values"]:
        problems.append(f"decoded {done['values']:,} JSON columns ({done['bad_values']:,} bad) of "
                        f"{rows.get('message', 0) + rows.get('part', 0):,} message and part rows")
    return problems


def collector(home: Path, work: Path, config: str = "",
              keep: Callable[[Path], None] | None = None) -> tuple[Run, int]:
    """``collect --once`` over ``home``; ``config``: the text of its config.toml; ``keep`` sees the
    output folder before it goes."""
    env = {**peer_env(home), "AGENT_COLLECTOR_DATA_DIR": str(work / "data"),
           "AGENT_COLLECTOR_CONFIG_DIR": str(work / "cfg")}
    if config:
        (work / "cfg").mkdir(parents=True, exist_ok=True)
        (work / "cfg" / "config.toml").write_text(config)
    out = work / "out"
    result = checked(run([sys.executable, "-m", "collector", "collect", "--once", "--home", str(home), "--output",
                          str(out)], {**env, "PYTHONPATH": str(ROOT)}), f"collect --once over {home}")
    entries = sum(p.read_bytes().count(b"\n") for p in out.glob("*.jsonl"))
    if entries == 0:
        raise Failed(f"collect --once over {home}", "exited 0 but wrote no entry")
    if keep is not None:
        keep(out)
    shutil.rmtree(work, ignore_errors=True)
    return result, entries


def ids_by_agent(out: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in out.glob("*.jsonl"):
        for line in path.read_bytes().splitlines():
            entry = orjson.loads(line)
            found.setdefault(entry["gen_ai.agent.type"], []).append(entry["event.id"])
    return {agent: sorted(ids) for agent, ids in found.items()}


def alone(args: argparse.Namespace, tmp: Path) -> None:
    """Issue item: an agent's output does not depend on what else is in the home. The mixed corpus once
    whole, then once per agent with the others switched off; the event ids must be equal."""
    home = tmp / "mixed" / "home"
    corpus = _corpora.build_mixed(home, args.mixed_mb)
    mixed: dict[str, list[str]] = {}
    collector(home, tmp / "mixed" / "work", keep=lambda out: mixed.update(ids_by_agent(out)))
    print(f"| agent ({corpus.sessions:,} sessions in all) | entries beside the others | entries alone | same ids |")
    print("|---|---|---|---|")
    for agent in sorted(mixed):
        off = "".join(f"[agents.{other}]\nenabled = false\n" for other in mixed if other != agent)
        found: dict[str, list[str]] = {}
        collector(home, tmp / agent, off, keep=lambda out, into=found: into.update(ids_by_agent(out)))
        print(f"| {agent} | {len(mixed[agent]):,} | {len(found.get(agent, [])):,} | "
              f"{'yes' if found.get(agent) == mixed[agent] else '**no**'} |", flush=True)


def agentsview(home: Path) -> Run | str:
    if not AGENTSVIEW.exists():
        return "not installed (--install-peers)"
    result = run([str(AGENTSVIEW), "sync"], {**peer_env(home), "AGENTSVIEW_NO_DAEMON": "1"})
    shutil.rmtree(home / ".agentsview", ignore_errors=True)
    return result


def ccusage(home: Path) -> Run | str:
    node = shutil.which("node")
    if not CCUSAGE.exists() or not node:
        return "not installed (--install-peers)" if node else "node not found"
    result = run([node, str(CCUSAGE), "daily", "--offline", "--json"], peer_env(home))
    if result.ok:
        try:
            days = orjson.loads(result.out).get("daily")
        except (orjson.JSONDecodeError, AttributeError):
            days = None
        if not days:  # a figure only for a run that counted something
            result.ok, result.note = False, f"exited 0 without a daily total: {result.out[:120]!r}"
    return result


def install_peers() -> None:
    PEERS.mkdir(parents=True, exist_ok=True)
    home = PEERS / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "npm_config_cache": str(PEERS / "npm"),
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_CONFIG_HOME": str(home / ".config")}
    if not CCUSAGE.exists():
        step(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(PEERS / "ccusage"),
              f"ccusage@{CCUSAGE_VERSION}"], env, "ccusage")
    if not AGENTSVIEW.exists():
        venv = PEERS / "agentsview-venv"
        if step([sys.executable, "-m", "venv", str(venv)], env, "agentsview venv"):
            step([str(venv / "bin" / "pip"), "install", "-q", "--cache-dir", str(PEERS / "pip"),
                  f"agentsview=={AGENTSVIEW_VERSION}"], env, "agentsview")


def step(cmd: list[str], env: dict[str, str], what: str) -> bool:
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"{what}: cannot install ({exc}); going on without it")
        return False
    if done.returncode:
        print(f"{what}: cannot install (offline?): {(done.stderr or done.stdout).strip()[-300:]}; going on")
    return done.returncode == 0


def build(name: str, home: Path, args: argparse.Namespace) -> _corpora.Corpus:
    if name == "claude":
        return _corpora.build_claude(home, args.claude_mb)
    if name == "mixed":
        return _corpora.build_mixed(home, args.mixed_mb)
    return _corpora.build_small(home, args.small)


TITLES = {"claude": "Claude Code transcripts", "mixed": "five agents mixed (OpenCode in SQLite)",
          "small": "small Claude Code transcripts"}


def fmt(result: Run | str, base: float) -> str:
    if isinstance(result, str):
        return result
    if not result.ok:
        return f"failed: {result.note}"
    return f"{result.cpu_s:.2f} s ({result.cpu_s / base:.1f}x)"


def compare(names: list[str], args: argparse.Namespace, tmp: Path) -> None:
    print("| corpus | agent-collector CPU s | orjson floor | ratio | agentsview sync | ccusage daily | "
          "entries | peak RSS |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        home = tmp / name / "home"
        corpus = build(name, home, args)
        base = floor(corpus)
        ours, entries = collector(home, tmp / name / "work")
        peers: list[Run | str] = [agentsview(home), ccusage(home)] if args.peers else ["skipped", "skipped"]
        print(f"| {corpus.mb:.0f} MB {TITLES[name]}, {corpus.sessions:,} sessions | {ours.cpu_s:.2f} "
              f"({corpus.mb / ours.cpu_s:.0f} MB per CPU s, {1000 * ours.cpu_s / corpus.sessions:.2f} ms per "
              f"session) | {base.cpu_s:.2f} | **{ours.cpu_s / base.cpu_s:.2f}x** | {fmt(peers[0], base.cpu_s)} | "
              f"{fmt(peers[1], base.cpu_s)} | {entries:,} | {ours.rss_mb:.0f} MB |", flush=True)
        shutil.rmtree(tmp / name, ignore_errors=True)


def scale(args: argparse.Namespace, tmp: Path) -> None:
    print("| corpus | MB | sessions | agent-collector CPU s | ms per MB | ms per session | orjson floor | "
          "ratio | peak RSS |")
    print("|---|---|---|---|---|---|---|---|---|")
    points = [("claude", mb) for mb in args.scale_mb] + [("small", n) for n in args.scale_sessions]
    for name, size in points:
        home = tmp / f"{name}-{size}" / "home"
        corpus = (_corpora.build_claude(home, size) if name == "claude" else _corpora.build_small(home, size))
        base = floor(corpus)
        ours, _ = collector(home, tmp / f"{name}-{size}" / "work")
        print(f"| {TITLES[name]} | {corpus.mb:.0f} | {corpus.sessions:,} | {ours.cpu_s:.2f} | "
              f"{1000 * ours.cpu_s / corpus.mb:.1f} | {1000 * ours.cpu_s / corpus.sessions:.2f} | "
              f"{base.cpu_s:.2f} | {ours.cpu_s / base.cpu_s:.2f}x | {ours.rss_mb:.0f} MB |", flush=True)
        shutil.rmtree(tmp / f"{name}-{size}", ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--install-peers", action="store_true")
    ap.add_argument("--no-peers", dest="peers", action="store_false", help="agent-collector and the floor only")
    ap.add_argument("--only", action="append", choices=("claude", "mixed", "small"))
    ap.add_argument("--claude-mb", type=float, default=200)
    ap.add_argument("--mixed-mb", type=float, default=200)
    ap.add_argument("--small", type=int, default=20000, help="number of small transcripts")
    ap.add_argument("--scale", action="store_true", help="linearity in MB and sessions instead of peers")
    ap.add_argument("--alone", action="store_true",
                    help="each agent of the mixed corpus collected alone: the same event ids as beside the others?")
    ap.add_argument("--scale-mb", type=lambda s: [float(x) for x in s.split(",")], default=[50, 200, 800])
    ap.add_argument("--scale-sessions", type=lambda s: [int(x) for x in s.split(",")],
                    default=[100, 1000, 5000, 20000])
    args = ap.parse_args()
    if args.install_peers:
        install_peers()
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        if args.scale:
            scale(args, Path(tmp))
        elif args.alone:
            alone(args, Path(tmp))
        else:
            compare(args.only or ["claude", "mixed", "small"], args, Path(tmp))
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
