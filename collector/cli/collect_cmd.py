"""``agent-collector collect --once`` and ``agent-collector run``."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

import orjson

from collector.cli.common import add_home, fail, paths_from, setup_logging
from collector.config import ConfigError
from collector.daemon import handoff
from collector.daemon.backfill import Meter, ProgressState, render
from collector.daemon.service import AlreadyRunning, Service


def register(subparsers: argparse._SubParsersAction) -> None:
    run = subparsers.add_parser(
        "run", help="run the collector daemon in the foreground",
        description="Collect continuously: follow hook spools, transcripts and databases of every enabled agent, "
                    "export entries as they appear. Logs go to stderr. SIGTERM or SIGINT flushes and stops.",
    )
    add_home(run)
    run.add_argument("--output", metavar="DIR", help="write the JSONL output here instead of <data dir>/output")
    run.add_argument("--deploy", action="store_true",
                     help="deploy the integrations of agents that are (or become) installed, as `install` does; "
                          "without it the daemon deploys nothing unless `agent-collector install` ran before")
    run.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    run.set_defaults(func=cmd_run)
    collect = subparsers.add_parser(
        "collect", help="process what exists now, then exit (backfill, tests, CI)",
        description="Read every source from its checkpoint to its current end, export, commit, exit. "
                    "Safe to repeat: nothing is read twice, nothing is written twice. When a daemon runs on "
                    "the same data, it does the work (it alone writes checkpoints and output) and this "
                    "command waits for it, showing its progress. With OTLP on, it sends the trace of every "
                    "turn its input shows finished (ended, or idle by its entries' own times) and waits for "
                    "delivery before it exits.",
    )
    collect.add_argument("--once", action="store_true", required=True, help="one pass (the only mode)")
    add_home(collect)
    collect.add_argument("--output", metavar="DIR", help="write the JSONL output here instead of <data dir>/output")
    collect.add_argument("-q", "--quiet", action="store_true", help="no progress or summary")
    collect.set_defaults(func=cmd_collect)


def _service(args: argparse.Namespace) -> Service:
    paths = paths_from(args)
    return Service(paths, output_dir=Path(args.output) if args.output else None, record_faults=True)


def cmd_collect(args: argparse.Namespace) -> int:
    setup_logging(quiet=True)
    try:
        service = _service(args)
        service.startup()
    except AlreadyRunning:
        return _hand_off(args, service)
    except ConfigError as exc:
        return fail(str(exc))
    line = _Line() if sys.stderr.isatty() and not args.quiet else None
    started = time.monotonic()
    try:
        meter = Meter(service.sources, line.show if line else None)
        result = asyncio.run(service.collect_once(meter))
        left = service.end_of_input() if result.blocked is None else []
    finally:
        service.shutdown()
        if line:
            line.done()
    for backlog in left:
        sys.stderr.write(f"{backlog.name}: not delivered yet: {backlog.queued} entries queued, {backlog.unsent} "
                         f"spans unsent ({backlog.error or 'no progress'}); the next run or the daemon sends "
                         "them\n")
    if result.blocked is not None:
        return fail(f"stopped before the end: {result.blocked}; what was not written is read again next time")
    if not args.quiet:
        _summary(result.entries, result.records, result.by_agent, time.monotonic() - started,
                 f"output: {service.output_dir}")
    return 0


def _hand_off(args: argparse.Namespace, service: Service) -> int:
    """A daemon runs on this data: it does the work (it alone writes checkpoints and output); we wait."""
    paths = service.paths
    pid = _daemon_pid(paths.state_dir)
    daemon_output = _daemon_output(paths.state_dir)
    if args.output and daemon_output and Path(args.output).resolve() != Path(daemon_output).resolve():
        return fail(f"the running daemon (pid {pid}) writes to {daemon_output}; --output cannot change that "
                    "while it runs (stop it with `agent-collector service stop`, or leave out --output)")
    if not args.quiet:
        sys.stderr.write(f"a daemon is running on {paths.data_dir} (pid {pid}): it collects, this waits\n")
    line = _Line() if sys.stderr.isatty() and not args.quiet else None
    started = time.monotonic()
    token = handoff.request(paths.state_dir)
    accept_s = max(15.0, 3 * service.config.collector.poll_interval_s)
    try:
        done = handoff.wait(paths.state_dir, token, lambda: _alive(pid), accept_s, line.show if line else None)
    except handoff.HandoffError as exc:
        return fail(str(exc), code=1)
    finally:
        if line:
            line.done()
    if not args.quiet:
        _summary(done.entries, done.records, done.by_agent, time.monotonic() - started,
                 f"by the daemon, pid {pid}; output: {daemon_output or service.output_dir}")
    return 0


def _summary(entries: int, records: int, by_agent: dict[str, int], seconds: float, where: str) -> None:
    per_agent = ", ".join(f"{a}: {n}" for a, n in sorted(by_agent.items())) or "nothing new"
    sys.stderr.write(f"collected {entries} entries from {records} records in {seconds:.1f}s ({per_agent}); "
                     f"{where}\n")


def _daemon_pid(state_dir: Path) -> int | None:
    try:
        return int((state_dir / "collector.lock").read_text().strip())
    except (OSError, ValueError):
        return None


def _daemon_output(state_dir: Path) -> str | None:
    try:
        return str(orjson.loads((state_dir / "status.json").read_bytes()).get("output_dir") or "") or None
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return None


def _alive(pid: int | None) -> bool:
    if pid is None:
        return True  # the lock is held; we cannot tell more
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cmd_run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    try:
        service = _service(args)
        service.startup(defer_external=True)  # external plugins are asked once the ingest listens
    except (AlreadyRunning, ConfigError) as exc:
        return fail(str(exc))
    from collector.cli.daemon_parts import daemon_parts  # the daemon's parts: not loaded by collect --once
    from collector.deploy import consent

    if getattr(args, "deploy", False):
        consent.give(service.paths, "agent-collector run --deploy")

    try:
        asyncio.run(service.serve(daemon_parts(service)))
    finally:
        service.shutdown()
    if service.fatal:
        return fail(f"{service.fatal}; the daemon stopped", 1)
    return 0


class _Line:
    """The progress line on a terminal: percent, bytes, records, ETA (see collector.daemon.backfill.render)."""

    def __init__(self) -> None:
        self.last = 0.0

    def show(self, state: ProgressState) -> None:
        now = time.monotonic()
        if now - self.last < 0.1:
            return
        self.last = now
        sys.stderr.write(f"\r\x1b[K{render(state)}")
        sys.stderr.flush()

    def done(self) -> None:
        sys.stderr.write("\r\x1b[K")
