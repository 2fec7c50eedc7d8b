#!/usr/bin/env python3
"""Wall time of one `agent-collector statusline` call as Claude Code makes it (`sh -c CMD` with the
status-line payload on stdin; CMD is what `statusline install` writes), next to `sh -c true` and
`python -c pass` in the same run, interleaved call by call so that load hits them alike. The cache
(spend.json) is written by the daemon's own code (`BudgetWatch`) from a usage store of 20,000 model
calls today, so it has the size a busy day gives.

It fails (exit 1) if a call did not do the work: every output must be the line computed from the
payload and that cache, and the cache must name the store's sessions.

    .venv/bin/python benchmarks/statusline_latency.py [--n 300]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.budget import call  # noqa: E402

from collector.config import load_config  # noqa: E402
from collector.daemon.budget_watch import BudgetWatch  # noqa: E402
from collector.deploy.statusline_setting import our_setting  # noqa: E402
from collector.paths import Paths  # noqa: E402
from collector.usage.statusline import line  # noqa: E402
from collector.usage.store import UsageStore  # noqa: E402

PAYLOAD = (ROOT / "tests" / "fixtures" / "statusline" / "claude-code" / "payload.json").read_bytes()
CONFIG = '[prices."m-test"]\ninput = 1.0\noutput = 2.0\n\n[[budget.limits]]\nname = "daily"\nusd = 50\n'


def cache(root: Path, calls: int) -> Paths:
    paths = Paths(home=root / "home", config_dir=root / "config", data_dir=root / "data")
    paths.config_dir.mkdir(parents=True)
    paths.config_file.write_text(CONFIG)
    store = UsageStore(paths.data_dir / "usage.sqlite")
    now = time.time()
    store.add([call(i, now - 60 - i * 0.5, 1000, 200, session=f"s{i % 40}") for i in range(calls)])
    store.close()
    watch = BudgetWatch(load_config(paths.config_file, env={}), paths, {})
    watch.check(lambda entries, _: entries, None)
    return paths


def one(cmd: str) -> tuple[float, bytes]:
    started = time.perf_counter()
    done = subprocess.run(["sh", "-c", cmd], input=PAYLOAD, capture_output=True, check=False)
    return (time.perf_counter() - started) * 1000, done.stdout


def summary(name: str, wall: list[float]) -> str:
    wall = sorted(wall)
    p95 = wall[min(len(wall) - 1, int(len(wall) * 0.95))]
    return f"{name:<34} median {statistics.median(wall):7.2f} ms   p95 {p95:7.2f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--calls", type=int, default=20_000, help="model calls in the usage store")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = cache(Path(tmp), args.calls)
        spend = json.loads((paths.state_dir / "spend.json").read_text())
        if len(spend["sessions"]) != 40 or spend["today"]["usd"] <= 0:
            print(f"error: the cache does not hold the store's day: {spend}", file=sys.stderr)
            return 1
        cmds = {
            "statusline (what install writes)": our_setting(paths, "claude-code", {})["command"],
            "python -c pass": shlex.join([sys.executable, "-c", "pass"]),
            "sh -c true": "true",
        }
        runs: dict[str, list[float]] = {name: [] for name in cmds}
        for _ in range(args.n):
            for name, cmd in cmds.items():
                wall, out = one(cmd)
                runs[name].append(wall)
                if name.startswith("statusline"):
                    want = line(json.loads(PAYLOAD), spend)
                    if out.decode().rstrip("\n") != want:
                        print(f"error: the status line printed {out!r}, not {want!r}", file=sys.stderr)
                        return 1
    for name, wall in runs.items():
        print(summary(name, wall))
    ours, floor = statistics.median(runs["statusline (what install writes)"]), statistics.median(runs["python -c pass"])
    print(f"statusline / python -c pass: {ours / floor:.2f}x; statusline - python -c pass: {ours - floor:.2f} ms")
    print(f"line: {line(json.loads(PAYLOAD), spend)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
