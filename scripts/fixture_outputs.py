"""What `collect --once` makes of every fixture home, in a form two versions of the code can be compared by:
for each case under tests/fixtures/<agent>/<case>/ (a home/ or spool/ folder), a copy is collected with the
real CLI into a fresh data directory and its JSONL output is written sorted, with the times the
collector stamps when it reads (`observed_time_unix_nano`, and the session status entries' own clock)
left out, to OUT/<agent>--<case>.jsonl. Every run uses the same content key (content digests compare).

    python scripts/fixture_outputs.py OUT            # write every case's output
    python scripts/fixture_outputs.py OUT --compare BEFORE   # and say which cases differ from BEFORE

Exits 1 when --compare finds a difference (the cases are named), 2 when a collect run fails.
A refactor that changes no behaviour leaves every file byte-identical.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
# what the collector stamps from its own clock, not from the agent's data
CLOCK_FIELDS = ("observed_time_unix_nano", "session.status.since_unix_nano", "collector.time_replaced")


def cases() -> list[Path]:
    return sorted(c for c in FIXTURES.glob("*/*") if c.is_dir() and ((c / "home").is_dir() or (c / "spool").is_dir()))


def collect(case: Path, work: Path) -> list[str]:
    home, data, config = work / "home", work / "data", work / "config"
    if (case / "home").is_dir():
        shutil.copytree(case / "home", home, symlinks=True)
    else:
        home.mkdir(parents=True)
    if (case / "spool").is_dir():
        shutil.copytree(case / "spool", data / "spool")
    config.mkdir(parents=True, exist_ok=True)
    state = data / "state"  # one content key for every run, so that content digests compare too
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = state / "content.key"
    key.write_text("00" * 32 + "\n")
    key.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_COLLECTOR_")}
    env.update(HOME=str(home), AGENT_COLLECTOR_DATA_DIR=str(data), AGENT_COLLECTOR_CONFIG_DIR=str(config))
    done = subprocess.run([sys.executable, "-m", "collector", "collect", "--once", "--home", str(home), "-q"],
                          env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{case.relative_to(FIXTURES)}: collect --once exited {done.returncode}: {done.stderr}")
    lines = []
    for file in sorted((data / "output").glob("activity-*.jsonl")):
        for line in file.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                for name in CLOCK_FIELDS:
                    entry.pop(name, None)
                lines.append(json.dumps(entry, sort_keys=True))
    return sorted(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="folder for one <agent>--<case>.jsonl per fixture case")
    parser.add_argument("--compare", type=Path, metavar="BEFORE", help="a folder an earlier run wrote")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    differ, total = [], 0
    for case in cases():
        name = f"{case.parent.name}--{case.name}.jsonl"
        with tempfile.TemporaryDirectory() as tmp:
            try:
                lines = collect(case, Path(tmp))
            except RuntimeError as exc:
                print(exc, file=sys.stderr)
                return 2
        text = "".join(line + "\n" for line in lines)
        (args.out / name).write_text(text)
        total += len(lines)
        if args.compare is not None:
            before = args.compare / name
            if not before.exists() or before.read_text() != text:
                differ.append(name)
    print(f"{len(cases())} fixture cases, {total} entries written to {args.out}")
    if differ:
        print(f"{len(differ)} differ from {args.compare}: " + ", ".join(differ))
        return 1
    if args.compare is not None:
        print(f"every case byte-identical to {args.compare}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
