#!/usr/bin/env python3
"""How far below agent-collector the backfill goals of `peers.py` lie: next to the parse floor (orjson of
every input line) and `collect --once`, the CPU of the work any collector with the same outputs must do
per entry, in plain Python without our code (`_work_floor.py`: build each entry as a dict, give it an id,
write it as a fsynced JSON line; then also store its numbers in SQLite under a key that is its dedupe), and of
starting the interpreter with orjson and sqlite3. Their sum over the parse floor is the least ratio a
CPython collector can reach on that corpus before it parses a record's meaning, masks a secret, keeps
session state or a checkpoint.

    .venv/bin/python benchmarks/work_floor.py [--only claude --only mixed --only small]

CPU seconds (user + system, from wait4, each in a process of its own), one run, the same corpora as
`peers.py` (benchmarks/_corpora.py).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402

HERE = Path(__file__).resolve().parent


def work(outputs: list[Path], scratch: Path, mode: str, entries: int) -> float:
    """CPU of the per-entry work alone; the benchmark stops unless both processes exit 0 and the work
    process handled every one of the ``entries``."""
    scratch.mkdir(parents=True, exist_ok=True)
    listing = scratch / "outputs.txt"
    listing.write_text("\n".join(str(p) for p in outputs))
    what = f"the work floor (_work_floor.py, {mode})"
    done = peers.checked(peers.run([sys.executable, str(HERE / "_work_floor.py"), str(listing), str(scratch), mode],
                                   {"PATH": ""}, timeout=1800), what)
    handled = done.out.split()[:1]
    if handled != [str(entries)]:
        raise peers.Failed(what, f"handled {done.out.strip()!r} entries of {entries}")
    load = peers.checked(peers.run([sys.executable, "-c", "import orjson, sys; from pathlib import Path; "
                                    "print(len([orjson.loads(x) for p in Path(sys.argv[1]).read_text().splitlines() "
                                    "for x in Path(p).read_bytes().splitlines() if x.strip()]))", str(listing)],
                                   {"PATH": ""}), "reading the entries in (work floor)")
    if load.out.strip() != str(entries):
        raise peers.Failed("reading the entries in (work floor)", f"read {load.out.strip()!r} of {entries}")
    for name in ("floor.jsonl", "floor.sqlite", "floor.sqlite-wal", "floor.sqlite-shm"):
        (scratch / name).unlink(missing_ok=True)
    return done.cpu_s - load.cpu_s  # the timed work only (reading the entries in is not part of it)


def one(name: str, args: argparse.Namespace, tmp: Path) -> None:
    home = tmp / name / "home"
    corpus = peers.build(name, home, args)
    base = peers.floor(corpus).cpu_s
    env = {**peers.peer_env(home), "AGENT_COLLECTOR_DATA_DIR": str(tmp / name / "data"),
           "AGENT_COLLECTOR_CONFIG_DIR": str(tmp / name / "cfg"), "PYTHONPATH": str(peers.ROOT)}
    out = tmp / name / "out"
    ours = peers.checked(peers.run([sys.executable, "-m", "collector", "collect", "--once", "--home", str(home),
                                    "--output", str(out)], env), f"collect --once ({name})")
    outputs = sorted(out.glob("*.jsonl"))
    entries = sum(p.read_bytes().count(b"\n") for p in outputs)
    if entries == 0:
        raise peers.Failed(f"collect --once ({name})", "exited 0 but wrote no entry")
    start = peers.checked(peers.run([sys.executable, "-c", "import orjson, sqlite3, hashlib"], {"PATH": ""}),
                          "interpreter start").cpu_s
    jsonl = work(outputs, tmp / name / "w", "jsonl", entries)
    full = work(outputs, tmp / name / "w", "sqlite", entries)
    goal = {"claude": 2.5, "mixed": 8.0, "small": 5.0}[name]
    least = base + start + jsonl
    print(f"| {name} | {entries:,} | {base:.2f} | {start:.2f} | {jsonl:.2f} | {full:.2f} | "
          f"{least / base:.1f}x | {(base + start + full) / base:.1f}x | {goal:g}x | {ours.cpu_s:.2f} "
          f"({ours.cpu_s / base:.1f}x) |", flush=True)
    shutil.rmtree(tmp / name, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--only", action="append", choices=("claude", "mixed", "small"))
    ap.add_argument("--claude-mb", type=float, default=200)
    ap.add_argument("--mixed-mb", type=float, default=200)
    ap.add_argument("--small", type=int, default=20000, help="number of small transcripts")
    args = ap.parse_args()
    print("| corpus | entries | parse floor | interpreter start | per-entry work, JSONL | per-entry work, JSONL + "
          "SQLite | least ratio, JSONL | least ratio, + SQLite | goal | agent-collector |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="work-floor-") as tmp:
        for name in args.only or ["claude", "mixed", "small"]:
            one(name, args, Path(tmp))


if __name__ == "__main__":
    main()
