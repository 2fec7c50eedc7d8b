#!/usr/bin/env python3
"""The delivery benchmarks before and after a change, in one run, on the same machine and load.

Checks out REF (the code before) and ``--after`` (default: this checkout) into temporary git worktrees,
copies this checkout's benchmark scripts into them (the same measurement on both sides), then runs,
alternating before/after for ``--rounds`` rounds: ``collect_throughput.py`` (backfill MB/s; plain orjson
MB/s in the same run shows the machine's load), ``hook_to_output_latency.py`` (hook append -> JSONL p99)
``hook_http_vs_shell.py`` (http hook medians) and ``relay_ack.py`` (the ingest's durable acknowledgement
alone, next to a bare write + fdatasync). Prints the median of the rounds per side.

    .venv/bin/python benchmarks/before_after.py REF [--after REF2] [--rounds 2] [--mb 100] [--n 200]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURES = {
    "backfill MB/s (`collect --once`)": ("collect_throughput.py", r"collect --once:\s+([\d.]+) MB/s"),
    "plain orjson MB/s, same run (load)": ("collect_throughput.py", r"orjson\.loads of every line:\s+([\d.]+)"),
    "hook -> output latency median ms": ("hook_to_output_latency.py", r"latency median ([\d.]+) ms"),
    "hook -> output latency p99 ms": ("hook_to_output_latency.py", r"p99 ([\d.]+) ms"),
    "http hook median ms, new connection, 50 ms apart": (
        "hook_http_vs_shell.py", r"\| http hook, new connection, 50 ms apart \| ([\d.]+)"),
    "http hook median ms, kept-alive, 50 ms apart": (
        "hook_http_vs_shell.py", r"\| http hook, kept-alive connection, 50 ms apart \| ([\d.]+)"),
    "http hook median ms, new connection, daemon backfilling": (
        "hook_http_vs_shell.py", r"\| http hook, new connection, 10 ms apart, daemon backfilling \| ([\d.]+)"),
    "http hook p99 ms, new connection, daemon backfilling": (
        "hook_http_vs_shell.py", r"daemon backfilling \| [\d.]+ \| ([\d.]+)"),
    "relay durable ack median ms, idle": ("relay_ack.py", r"\| relay ack, idle \| ([\d.]+)"),
    "relay durable ack p99 ms, idle": ("relay_ack.py", r"\| relay ack, idle \| [\d.]+ \| ([\d.]+)"),
    "relay durable ack median ms, CPU thread busy": ("relay_ack.py", r"\| relay ack, CPU thread busy \| ([\d.]+)"),
    "relay durable ack p99 ms, CPU thread busy": (
        "relay_ack.py", r"\| relay ack, CPU thread busy \| [\d.]+ \| ([\d.]+)"),
    "write + fdatasync median ms, idle (floor)": ("relay_ack.py", r"\| write \+ fdatasync, idle \(floor\) \| ([\d.]+)"),
    "write + fdatasync median ms, CPU thread busy (floor)": (
        "relay_ack.py", r"\| write \+ fdatasync, CPU thread busy \(floor\) \| ([\d.]+)"),
}


def run(tree: Path, script: str, args: list[str]) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, str(tree / "benchmarks" / script), *args], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{script} in {tree} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ref")
    ap.add_argument("--after", help="the code after (default: this checkout)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--only", action="append", help="run only this script (repeatable)")
    ap.add_argument("--http-only", action="store_true", help="hook_http_vs_shell.py: the http rows only")
    args = ap.parse_args()
    http = ["--n", str(args.n)] + (["--http-only"] if args.http_only else [])
    scripts = {"collect_throughput.py": ["--mb", str(args.mb)], "hook_to_output_latency.py": ["--n", str(args.n)],
               "hook_http_vs_shell.py": http, "relay_ack.py": ["--n", str(args.n)]}
    scripts = {k: v for k, v in scripts.items() if not args.only or k in args.only}
    with tempfile.TemporaryDirectory() as tmp:
        before, after = Path(tmp) / "before", (Path(tmp) / "after" if args.after else ROOT)
        trees = [(before, args.ref)] + ([(after, args.after)] if args.after else [])
        for tree, ref in trees:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), ref], check=True)
            for script in (ROOT / "benchmarks").glob("*.py"):
                shutil.copy(script, tree / "benchmarks" / script.name)
        try:
            figures: dict[str, dict[str, list[float]]] = {f: {"before": [], "after": []} for f in FIGURES}
            for _ in range(args.rounds):
                for side, tree in (("before", before), ("after", after)):
                    for script, script_args in scripts.items():
                        out = run(tree, script, script_args)
                        for figure, (source, pattern) in FIGURES.items():
                            match = re.search(pattern, out) if source == script else None
                            if match:
                                figures[figure][side].append(float(match.group(1)))
        finally:
            for tree, _ref in trees:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    print(f"before = {args.ref}, after = {args.after or 'this checkout'}; median of {args.rounds} alternating rounds")
    print("| figure | before | after |")
    print("|---|---|---|")
    for figure, sides in figures.items():
        cells = [f"{statistics.median(v):.2f}" if v else "-" for v in (sides["before"], sides["after"])]
        print(f"| {figure} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
