"""The long run of the single-field mutation fuzz (tests/pipeline/test_fuzz_pipeline.py): N Hypothesis examples,
each one hostile value in one field of one real fixture record of any agent, through the whole pipeline
and the JSONL and OTLP exporters. Prints the examples run, the outcome and the time per example.

    .venv/bin/python benchmarks/fuzz_pipeline.py --examples 20000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=5000)
    args = parser.parse_args()
    env = {**os.environ, "AGENT_COLLECTOR_FUZZ_EXAMPLES": str(args.examples)}
    started = time.monotonic()
    # no per-test time limit: the suite's 600 s (pytest-timeout) cut a long run short and was reported as a
    # failing example (in the middle of whatever the example was doing)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:logging",
                           "--timeout=0", "--hypothesis-show-statistics", "tests/pipeline/test_fuzz_pipeline.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    tail = [line for line in done.stdout.splitlines() if "passing" in line or "passed" in line or "failed" in line]
    print("\n".join(tail[-4:]))
    outcome = "0 uncaught exceptions" if done.returncode == 0 else "FAILED (see pytest output)"
    print(f"{args.examples} mutants: {outcome}; {elapsed:.0f} s, {1000 * elapsed / args.examples:.1f} ms each")
    if done.returncode:
        keep = ("Draw ", "Error", "assert", "File ", "Falsifying", "Failing", "Failed", "Timeout", "Exception")
        lines = [line[:300] for line in done.stdout.splitlines()
                 if any(k in line for k in keep) and "quarantined at" not in line]
        print("\n".join(lines)[-12000:])
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
