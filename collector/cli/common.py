"""Bits every command uses: --home, the checked configuration, logging, table and JSON output."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson

from collector.paths import Paths, resolve_paths
from collector.util.terminal import escape, escape_output

if TYPE_CHECKING:
    from collector.config import Config


class CommandError(Exception):
    """A command cannot go on: ``main`` prints ``agent-collector: error: <message>`` and exits ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def add_home(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--home", metavar="DIR",
        help="home directory the agents live in (default: $AGENT_COLLECTOR_HOME or $HOME); our config and "
             "data then default to DIR/.config/agent-collector and DIR/.local/share/agent-collector",
    )


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def paths_from(args: argparse.Namespace) -> Paths:
    return resolve_paths(getattr(args, "home", None))


def checked_config(paths: Paths, refusal: str = "") -> Config:
    """The configuration, with the user's agents.d overrides checked the way the daemon checks them at its
    start (``collector.config.load_for``). A problem ends the command with exit status 2 and one line
    naming it, after ``refusal`` (e.g. ``"not started: "``)."""
    from collector.config import ConfigError, load_for
    from collector.daemon.plugins import check_definition

    try:
        return load_for(paths, check=check_definition)
    except ConfigError as exc:
        raise CommandError(refusal + str(exc)) from exc


def setup_logging(verbose: int = 0, quiet: bool = False) -> None:
    level = logging.WARNING if quiet else (logging.DEBUG if verbose > 1 else logging.INFO)
    logging.basicConfig(stream=sys.stderr, level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if level > logging.DEBUG:  # watchfiles says "N changes detected" at INFO on every file event
        logging.getLogger("watchfiles").setLevel(logging.WARNING)


def print_json(data: Any) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n")


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[escape(h) for h in headers]] + [["" if c is None else escape(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def fail(message: str, code: int = 2) -> int:
    sys.stderr.write(f"agent-collector: error: {escape_output(message)}\n")
    return code
