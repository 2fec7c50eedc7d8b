"""``agent-collector collect --once`` and ``agent-collector run``."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from collector.cli.common import add_home, fail, paths_from, setup_logging
from collector.cli.daemon_parts import daemon_parts
from collector.config import ConfigError
from collector.service import AlreadyRunning, Service


def register(subparsers: argparse._SubParsersAction) -> None:
    run = subparsers.add_parser(
        "run", help="run the collector daemon in the foreground",
        description="Collect continuously: follow hook spools, transcripts and databases of every enabled agent, "
                    "export entries as they appear. Logs go to stderr. SIGTERM or SIGINT flushes and stops.",
    )
    add_home(run)
    run.add_argument("--output", metavar="DIR", help="write the JSONL output here instead of <data dir>/output")
    run.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    run.set_defaults(func=cmd_run)
    collect = subparsers.add_parser(
        "collect", help="process what exists now, then exit (backfill, tests, CI)",
        description="Read every source from its checkpoint to its current end, export, commit, exit. "
                    "Safe to repeat: nothing is read twice, nothing is written twice.",
    )
    collect.add_argument("--once", action="store_true", required=True, help="one pass (the only mode)")
    add_home(collect)
    collect.add_argument("--output", metavar="DIR", help="write the JSONL output here instead of <data dir>/output")
    collect.add_argument("-q", "--quiet", action="store_true", help="no progress or summary")
    collect.set_defaults(func=cmd_collect)


def _service(args: argparse.Namespace) -> Service:
    paths = paths_from(args)
    return Service(paths, output_dir=Path(args.output) if args.output else None)


def cmd_collect(args: argparse.Namespace) -> int:
    setup_logging(quiet=True)
    try:
        service = _service(args)
        service.startup()
    except (AlreadyRunning, ConfigError) as exc:
        return fail(str(exc))
    progress = _Progress() if sys.stderr.isatty() and not args.quiet else None
    started = time.monotonic()
    try:
        result = asyncio.run(service.collect_once(progress))
    finally:
        service.shutdown()
        if progress:
            progress.done()
    if not args.quiet:
        per_agent = ", ".join(f"{a}: {n}" for a, n in sorted(result.by_agent.items())) or "nothing new"
        sys.stderr.write(
            f"collected {result.entries} entries from {result.records} records in "
            f"{time.monotonic() - started:.1f}s ({per_agent}); output: {service.output_dir}\n"
        )
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    try:
        service = _service(args)
        service.startup()
    except (AlreadyRunning, ConfigError) as exc:
        return fail(str(exc))
    try:
        asyncio.run(service.serve(daemon_parts(service)))
    finally:
        service.shutdown()
    return 0


class _Progress:
    """A one-line progress display on a terminal."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.last = 0.0

    def __call__(self, source: str, records: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.1:
            return
        self.last = now
        rate = records / max(now - self.started, 1e-6)
        sys.stderr.write(f"\r\x1b[K{records:>10,} records  {rate:>9,.0f}/s  {source[:50]}")
        sys.stderr.flush()

    def done(self) -> None:
        sys.stderr.write("\r\x1b[K")
