"""CPU cost of idle polling: a `command` source whose program has nothing new, and 5 external agent plugins
whose sessions were all read already. Each poll is driven through the source's read() with its clock moved
past the interval, so every call is a real poll; CPU is this process's plus its children's (the programs
run). Printed: CPU per poll and per hour at the given interval.

    .venv/bin/python benchmarks/polling_cost.py [--polls 200] [--interval 60] [--opencode PATH]

--opencode also measures `opencode session list --format json --pure` as the idle command (a real CLI
start per poll)."""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from collector.external.discovery import discover  # noqa: E402
from collector.external.plugin import Caller  # noqa: E402
from collector.external.source import ExternalSource  # noqa: E402
from collector.sources.commands import CommandSource, CommandSpec  # noqa: E402
from collector.sources.process import Limits  # noqa: E402

PLUGIN = ROOT / "tests" / "fixtures" / "external" / "misfit_plugin.py"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def drain(source: Any) -> int:
    async def run() -> int:
        records = 0
        async for record, _ in source.read():
            records += record is not None
        return records

    return asyncio.run(run())


def measure(source: Any, clock: Clock, polls: int) -> float:
    drain(source)  # the first poll reads what there is; the rest are idle
    clock.now += 10**6
    start = cpu()
    for _ in range(polls):
        assert drain(source) == 0, "not idle"
        clock.now += 10**6
    return (cpu() - start) / polls


def command_case(argv: list[str], cwd: str | None, polls: int) -> float:
    clock = Clock()
    spec = CommandSpec(argv=tuple(argv), limits=Limits(30, 16 << 20, 1 << 16), interval_s=60, cwd=cwd,
                       cursor_field="updated", cursor_key="id")
    return measure(CommandSource("bench:command", "bench", spec, {}, clock=clock), clock, polls)


def external_case(tmp: Path, plugins: int, polls: int) -> float:
    bin_dir, sessions = tmp / "bin", tmp / "sessions"
    for n in range(plugins):
        path = bin_dir / f"entire-agent-good{n}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"#!{sys.executable}\n" + PLUGIN.read_text())
        path.chmod(0o755)
        transcript = sessions / f"good{n}" / "s1.jsonl"
        transcript.parent.mkdir(parents=True, exist_ok=True)
        transcript.write_text(json.dumps({"type": "user", "text": "hi"}) + "\n")
    import os

    os.environ["MISFIT_SESSIONS"] = str(sessions)
    found = discover(str(bin_dir), [], str(tmp), 10 << 20)
    assert len(found.plugins) == plugins, found.skipped
    clock = Clock()
    sources = [ExternalSource(p, [str(tmp)], Caller(Limits(30, 10 << 20, 1 << 16)), 60, {}, clock=clock)
               for p in found.plugins]

    class All:
        async def read(self) -> Any:
            for source in sources:
                async for item in source.read():
                    yield item

    return measure(All(), clock, polls)


def report(what: str, per_poll: float, interval: float) -> None:
    print(f"{what}: {per_poll * 1000:.3f} ms CPU per poll, {per_poll * 3600 / interval:.3f} s CPU per hour "
          f"at one poll per {interval:g} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--polls", type=int, default=200)
    parser.add_argument("--interval", type=float, default=60.0)
    parser.add_argument("--opencode", help="path of the opencode CLI (optional)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        program = Path(tmp) / "nothing-new"
        program.write_text("#!/bin/sh\necho '[]'\n")
        program.chmod(0o755)
        report("idle command source (sh printing [])", command_case([str(program)], None, args.polls), args.interval)
        if args.opencode:
            argv = [args.opencode, "session", "list", "--format", "json", "--pure"]
            report("idle command source (opencode session list)", command_case(argv, tmp, max(5, args.polls // 20)),
                   args.interval)
        report("5 idle external plugins", external_case(Path(tmp), 5, args.polls), args.interval)


if __name__ == "__main__":
    main()
