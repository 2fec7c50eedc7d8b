"""``agent-collector quarantine list|retry``: the records that failed after they were read."""

from __future__ import annotations

import argparse
import asyncio
import time

from collector.cli.common import add_home, add_json, fail, paths_from, print_json, print_table, setup_logging
from collector.config import ConfigError
from collector.pipeline.quarantine import listing, quarantine_dir, request_retry


def register(subparsers: argparse._SubParsersAction) -> None:
    quarantine = subparsers.add_parser(
        "quarantine", help="records that failed after they were read: list them, retry them",
        description="A record that fails anywhere in the pipeline is kept in <data dir>/quarantine/ with its "
                    "source position and the reason, and its batch goes on without it.",
    )
    actions = quarantine.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = actions.add_parser("list", help="one line per quarantined record: id, time, source, stage, reason")
    add_home(show)
    add_json(show)
    show.set_defaults(func=cmd_list)
    retry = actions.add_parser(
        "retry", help="feed quarantined records through the pipeline again (e.g. after an upgrade)",
        description="The records go back through the pipeline at the running daemon's next cycle, or at once "
                    "when no daemon runs; an entry an exporter failed on goes to that exporter alone. One that "
                    "fails again returns to the quarantine.",
    )
    add_home(retry)
    retry.add_argument("ids", nargs="*", metavar="ID", help="records to retry (default: all)")
    retry.set_defaults(func=cmd_retry)


def cmd_list(args: argparse.Namespace) -> int:
    lines = listing(quarantine_dir(paths_from(args)))
    if args.json:
        print_json(lines)
        return 0
    rows = [(x.get("id"), time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(int(x.get("at", 0)) / 1e9)),
             f"{x.get('agent')}:{x.get('kind')}", f"{x.get('path')}@{x.get('position')}", x.get("stage"),
             x.get("reason"), x.get("attempts")) for x in lines]
    print_table(["ID", "QUARANTINED (UTC)", "SOURCE", "POSITION", "STAGE", "REASON", "ATTEMPTS"], rows)
    return 0


def cmd_retry(args: argparse.Namespace) -> int:
    from collector.daemon.service import AlreadyRunning, Service

    setup_logging(quiet=True)
    paths = paths_from(args)
    moved = request_retry(quarantine_dir(paths), args.ids or None)
    if not moved:
        print("nothing to retry")
        return 0
    try:
        service = Service(paths)
        service.startup()
    except AlreadyRunning:
        print(f"{moved} records queued; the running daemon retries them at its next cycle")
        return 0
    except ConfigError as exc:
        return fail(str(exc))
    try:
        asyncio.run(service.collect_once())
    finally:
        service.shutdown()
    left = len(listing(quarantine_dir(paths)))
    print(f"{moved} records retried; {left} in quarantine now")
    return 0
