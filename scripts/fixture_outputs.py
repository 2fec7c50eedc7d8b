"""What `collect --once` makes of every fixture home, in a form two versions of the code can be compared by:
for each case under tests/fixtures/<agent>/<case>/ (a home/ or spool/ folder), a copy is collected with the
real CLI into a fresh data directory and its JSONL output is written sorted, with the times the
collector stamps when it reads (`observed_time_unix_nano`, and the session status entries' own clock)
left out, to OUT/<agent>--<case>.jsonl. A case with both is collected a second time from its home alone
(OUT/<agent>--<case>--files_alone.jsonl, the agent's own files without hooks), and each hook recording of
tests/fixtures/hooks/<agent>/<case>.jsonl on its own as the spool of an empty home
(OUT/hooks--<agent>--<case>.jsonl). Every run uses the same content key (content digests compare).

    python scripts/fixture_outputs.py OUT            # write every case's output
    python scripts/fixture_outputs.py OUT --compare BEFORE   # and say which cases differ from BEFORE
    python scripts/fixture_outputs.py OUT --code DIR  # run the collector of another checkout (e.g. a
                                                      # `git worktree` of an older commit) on these fixtures

Exits 1 when --compare finds a difference (the cases are named, with how many lines differ), 2 when a
collect run fails. A refactor that changes no behaviour leaves every file byte-identical.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
# what the collector stamps from its own clock, not from the agent's data
CLOCK_FIELDS = ("observed_time_unix_nano", "session.status.since_unix_nano", "collector.time_replaced")


@dataclass(frozen=True)
class Case:
    """One collect run: a home to copy (or none) and a spool to copy, as folder or as one agent's file."""

    name: str
    home: Path | None
    spool: Path | None


def cases() -> list[Case]:
    out = []
    for case in sorted(c for c in FIXTURES.glob("*/*") if c.is_dir()):
        home = case / "home" if (case / "home").is_dir() else None
        spool = case / "spool" if (case / "spool").is_dir() else None
        if home is None and spool is None:
            continue
        name = f"{case.parent.name}--{case.name}"
        out.append(Case(name, home, spool))
        if home is not None and spool is not None and any(home.iterdir()):
            out.append(Case(f"{name}--files_alone", home, None))
    for recording in sorted((FIXTURES / "hooks").glob("*/*.jsonl")):
        out.append(Case(f"hooks--{recording.parent.name}--{recording.stem}", None, recording))
    return out


def collect(case: Case, work: Path, code: Path) -> list[str]:
    home, data, config = work / "home", work / "data", work / "config"
    if case.home is not None:
        shutil.copytree(case.home, home, symlinks=True)
    else:
        home.mkdir(parents=True)
    if case.spool is not None and case.spool.is_dir():
        shutil.copytree(case.spool, data / "spool")
    elif case.spool is not None:  # a hook recording: <data>/spool/<agent>/<agent>-<case>.jsonl
        agent = case.spool.parent.name
        (data / "spool" / agent).mkdir(parents=True)
        shutil.copyfile(case.spool, data / "spool" / agent / f"{agent}-{case.spool.stem}.jsonl")
    config.mkdir(parents=True, exist_ok=True)
    state = data / "state"  # one content key for every run, so that content digests compare too
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = state / "content.key"
    key.write_text("00" * 32 + "\n")
    key.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_COLLECTOR_")}
    env.update(HOME=str(home), AGENT_COLLECTOR_DATA_DIR=str(data), AGENT_COLLECTOR_CONFIG_DIR=str(config),
               PYTHONPATH=str(code))
    done = subprocess.run([sys.executable, "-m", "collector", "collect", "--once", "--home", str(home), "-q"],
                          env=env, capture_output=True, text=True, timeout=300, cwd=code)
    if done.returncode != 0:
        raise RuntimeError(f"{case.name}: collect --once exited {done.returncode}: {done.stderr}")
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
    parser.add_argument("--code", type=Path, default=ROOT, metavar="DIR",
                        help="the checkout whose collector runs (default: this one); the fixtures are this one's")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    code = args.code.resolve()
    if not (code / "collector" / "__main__.py").is_file():
        parser.error(f"{code} holds no collector/ package")
    differ, total, every = [], 0, cases()
    for case in every:
        name = f"{case.name}.jsonl"
        with tempfile.TemporaryDirectory() as tmp:
            try:
                lines = collect(case, Path(tmp), code)
            except RuntimeError as exc:
                print(exc, file=sys.stderr)
                return 2
        text = "".join(line + "\n" for line in lines)
        (args.out / name).write_text(text)
        total += len(lines)
        if args.compare is not None:
            before = args.compare / name
            old = before.read_text().splitlines() if before.exists() else []
            if not before.exists() or before.read_text() != text:
                changed = len(set(old) ^ set(lines)) or abs(len(old) - len(lines))
                differ.append(f"{name} ({changed} lines)" if before.exists() else f"{name} (not in BEFORE)")
    print(f"{len(every)} fixture cases, {total} entries written to {args.out} by {code}")
    if differ:
        print(f"{len(differ)} differ from {args.compare}: " + ", ".join(differ))
        return 1
    if args.compare is not None:
        print(f"every case byte-identical to {args.compare}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
