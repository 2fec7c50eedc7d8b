"""``agent-collector statusline``: one line for an agent's status bar, from its status-line JSON on stdin
and the daemon's ``<state dir>/spend.json`` (no usage-store scan); ``install`` / ``uninstall`` set and
undo the agent's status-line setting, keeping one the user had (docs/budgets.md).

The command ``install`` writes is ``python -m collector.cli.statusline_cmd --state-dir DIR``: that way
(``main`` below) imports nothing but this module and ``collector.usage.statusline`` (no path resolution,
no logging, no orjson), since the agent starts it at every refresh."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collector.usage.statusline import DEFAULT_FORMAT, FIELDS, line, values

MAX_STDIN = 1 << 20
CHAIN_TIMEOUT_S = 2.0
WHAT = ("One line for an agent's status bar: the session's cost, today's cost, the time left in the current "
        "5-hour block and the budgets' state. Reads the agent's status-line JSON on stdin (Claude Code's "
        "statusLine command) and the small cache the daemon keeps (<state dir>/spend.json), so it answers in "
        "milliseconds; `install` sets the agent's status-line setting to it (a status line you had is kept "
        "and shown first), `uninstall` puts the previous setting back.")


def register(subparsers: argparse._SubParsersAction) -> None:
    from collector.cli.common import add_home

    parser = subparsers.add_parser("statusline", help="one status-bar line: session, today, block, budgets",
                                   description=WHAT)
    add_home(parser)
    _options(parser)


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=("show", "install", "uninstall"), default="show",
                        help="show (default): print the line; install / uninstall: the agent's setting")
    parser.add_argument("--agent", default="claude-code",
                        help="the agent whose status line this is (default claude-code)")
    parser.add_argument("--format", default=DEFAULT_FORMAT,
                        help=f"the line, with fields in braces: {', '.join('{' + f + '}' for f in FIELDS)} "
                             f"(default {DEFAULT_FORMAT!r})")
    parser.add_argument("--json", action="store_true", help="print the values as JSON instead of the line")
    parser.add_argument("--dry-run", action="store_true", help="install / uninstall: say what would change")
    parser.add_argument("--state-dir", type=Path, help="where spend.json is (default: ours, from --home)")
    parser.set_defaults(func=run)


def _payload() -> dict[str, Any]:
    if sys.stdin is None or sys.stdin.isatty():
        return {}
    text = sys.stdin.buffer.read(MAX_STDIN)
    try:
        data = json.loads(text)
    except ValueError:
        return {"_raw": text}
    return data if isinstance(data, dict) else {}


def _read_json(path: Any) -> Any:
    try:
        with open(path, "rb") as f:
            return json.loads(f.read(MAX_STDIN))
    except (OSError, ValueError):
        return None


def chained(state_dir: Path, agent: str, raw: bytes) -> str:
    """The first line of the status line the user had before ``install``, run with the same stdin."""
    saved = _read_json(state_dir / "statusline.json")
    previous = saved.get(agent, {}).get("previous") if isinstance(saved, dict) else None
    command = previous.get("command") if isinstance(previous, dict) else None
    return run_previous(command, raw) if isinstance(command, str) else ""


def run_previous(command: str, raw: bytes) -> str:
    """The first line a status-line command the user had prints for ``raw`` on its stdin ("" on failure)."""
    if not command.strip():
        return ""
    import subprocess  # only for a chained status line: its import costs more than the rest of the line

    try:
        done = subprocess.run(command, shell=True, input=raw, capture_output=True,  # noqa: S602 - the user's own
                              timeout=CHAIN_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.decode("utf-8", "replace").split("\n", 1)[0].rstrip()


def run(args: argparse.Namespace) -> int:
    if args.action != "show":
        return _change(args)
    state_dir = args.state_dir
    if state_dir is None:
        from collector.cli.common import paths_from

        state_dir = paths_from(args).state_dir
    payload = _payload()
    raw = payload.pop("_raw", None)
    spend = _read_json(state_dir / "spend.json")
    spend = spend if isinstance(spend, dict) else None
    out = sys.__stdout__ or sys.stdout  # the agent shows ANSI colours a --format may hold: not escaped
    if args.json:
        out.write(json.dumps(values(payload, spend or {}, time.time())) + "\n")
        return 0
    ours = line(payload, spend, args.format)
    before = chained(state_dir, args.agent, raw if isinstance(raw, bytes) else json.dumps(payload).encode())
    out.write(f"{before}  {ours}\n" if before else ours + "\n")
    out.flush()
    return 0


def _change(args: argparse.Namespace) -> int:
    from collector.cli.common import CommandError, paths_from
    from collector.deploy.statusline_setting import change

    try:
        for text in change(paths_from(args), args.agent, args.action == "install", args.dry_run):
            print(text)
    except ValueError as exc:
        raise CommandError(str(exc), 2) from exc
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m collector.cli.statusline_cmd``: the status line alone (see the module)."""
    parser = argparse.ArgumentParser(prog="agent-collector statusline", description=WHAT)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    _options(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
