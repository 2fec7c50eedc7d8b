#!/usr/bin/env python3
"""`agent-collector report daily` next to `ccusage daily --offline` on the same >= 200 MB of Claude Code
transcripts (replays of the real fixture transcript with fresh ids, benchmarks/_claude_corpus.py).

    .venv/bin/python benchmarks/report_vs_ccusage.py [--mb 200] [--install-ccusage]

Our side: `collect --once` builds the usage store once (timed apart; the daemon does this as the
transcripts are written), then `report daily` reads it (timed, process start included). ccusage reads the
transcripts on every call. ccusage 20.0.24 comes from npm into .cache/ccusage when --install-ccusage is
given (or is already there). Both print their totals so the numbers can be compared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _claude_corpus import FIXTURE, generate, template_lines  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CCUSAGE_VERSION = "20.0.24"
CCUSAGE_DIR = ROOT / ".cache" / "ccusage"
CCUSAGE_BIN = CCUSAGE_DIR / "node_modules" / ".bin" / "ccusage"


def install_ccusage() -> None:
    CCUSAGE_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(CCUSAGE_DIR),
                    f"ccusage@{CCUSAGE_VERSION}"], check=True, env={**os.environ,
                   "npm_config_cache": str(ROOT / ".cache" / "npm")})


def truth(home: Path) -> str:
    """The model server's own records of the replayed session, times the number of replays."""
    lines = sum(p.read_bytes().count(b"\n") for p in (home / ".claude" / "projects").glob("*/*.jsonl"))
    replays = lines // len(template_lines())
    served = [json.loads(x)["usage"] for x in (FIXTURE / "response_usage.jsonl").read_text().splitlines() if x]
    calls = len(served) * replays
    uncached = sum(u["input_tokens"] for u in served) * replays
    read = sum(u.get("cache_read_input_tokens", 0) for u in served) * replays
    write = sum(u.get("cache_creation_input_tokens", 0) for u in served) * replays
    output = sum(u["output_tokens"] for u in served) * replays
    return (f"truth (model server records x {replays} replays): {calls:,} calls, input {uncached + read + write:,} "
            f"(uncached {uncached:,}, cache read {read:,}, write {write:,}), output {output:,}")


def timed(cmd: list[str], env: dict[str, str], repeat: int) -> tuple[list[float], str]:
    times, out = [], ""
    for _ in range(repeat):
        started = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        times.append(time.perf_counter() - started)
        out = done.stdout
    return times, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--install-ccusage", action="store_true", help=f"npm install ccusage@{CCUSAGE_VERSION}")
    args = ap.parse_args()
    if args.install_ccusage and not CCUSAGE_BIN.exists():
        install_ccusage()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        files, size = generate(home / ".claude" / "projects", args.mb * 1024 * 1024)
        print(f"corpus: {files} files, {size / 2**20:.0f} MB of Claude Code transcripts")
        print(truth(home))
        env = {**os.environ, "HOME": str(home), "AGENT_COLLECTOR_DATA_DIR": f"{tmp}/data",
               "AGENT_COLLECTOR_CONFIG_DIR": f"{tmp}/cfg", "CLAUDE_CONFIG_DIR": str(home / ".claude"),
               "TZ": "UTC"}
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "collector", "collect", "--once", "--home", str(home)], env=env,
                       check=True, capture_output=True)
        print(f"collect --once (builds the store once): {time.perf_counter() - started:.1f} s, store "
              f"{Path(tmp, 'data', 'usage.sqlite').stat().st_size / 2**20:.0f} MiB")
        ours, out = timed([sys.executable, "-m", "collector", "report", "daily", "--json", "--home", str(home),
                           "--timezone", "UTC"], env, args.repeat)
        total = json.loads(out)["total"]
        print(f"agent-collector report daily: median {statistics.median(ours):.2f} s (min {min(ours):.2f}, "
              f"{args.repeat} runs); {total['calls']:,} calls, input {total['input_tokens']:,} (uncached "
              f"{total['uncached_input_tokens']:,}, cache read "
              f"{total['cache_read_tokens']:,}, write {total['cache_write_tokens']:,}), output "
              f"{total['output_tokens']:,}, cost ${total['cost_usd']:,.2f}")
        if not CCUSAGE_BIN.exists():
            print(f"ccusage: not installed (run with --install-ccusage to npm-install {CCUSAGE_VERSION} "
                  f"into {CCUSAGE_DIR})")
            return 0
        node = shutil.which("node") or "node"
        theirs, out = timed([node, str(CCUSAGE_BIN), "daily", "--offline", "--json"], env, args.repeat)
        data = json.loads(out)
        t = data.get("totals", {})
        print(f"ccusage {CCUSAGE_VERSION} daily --offline: median {statistics.median(theirs):.2f} s (min "
              f"{min(theirs):.2f}, {args.repeat} runs); input {t.get('inputTokens', 0):,} (uncached), cache "
              f"read {t.get('cacheReadTokens', 0):,}, write {t.get('cacheCreationTokens', 0):,}, output "
              f"{t.get('outputTokens', 0):,}, cost ${t.get('totalCost', 0):,.2f}")
        print(f"report daily is {statistics.median(theirs) / statistics.median(ours):.1f}x faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
