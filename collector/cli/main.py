"""Entry point: ``agent-collector <command>``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from collector import __version__
from collector.cli.common import CommandError, fail
from collector.util import gc_tuning
from collector.util.private import NotRegularFile
from collector.util.terminal import TerminalWriter

# Command modules (under collector.cli), each with register(subparsers), in the order of `--help`, and
# the commands each one registers. A command imports only its own module: `report` does not pay for the
# deploy engine, jsonschema or the daemon (tests/test_cli_lazy.py keeps this table true).
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "collect_cmd": ("run", "collect"), "agents_cmd": ("agents",), "deploy_cmd": ("install", "uninstall"),
    "status_cmd": ("status",), "config_cmd": ("config",), "live_cmd": ("sessions",), "report_cmd": ("report",),
    "doctor_cmd": ("doctor",), "dashboard_cmd": ("dashboard",), "service_cmd": ("service",),
    "quarantine_cmd": ("quarantine",), "attributes_cmd": ("attributes",),
    "import_cmd": ("import",),
    "statusline_cmd": ("statusline",),
}


def _modules_for(command: str | None) -> list[str]:
    """The modules to import for ``command``; every one for ``--help``, ``--version`` or an unknown name
    (argparse then lists them all)."""
    named = [module for module, commands in COMMAND_MODULES.items() if command in commands]
    return named or list(COMMAND_MODULES)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser for ``command`` alone (its module's subparsers), or, without one, for every command."""
    parser = argparse.ArgumentParser(
        prog="agent-collector",
        description="Telemetry collector for AI coding agents (Claude Code, Codex CLI, Gemini CLI, Qwen Code, "
                    "OpenCode, ...): sessions, prompts, model calls, tokens and tool calls in one schema, "
                    "written to local JSONL and optionally OTLP.",
        epilog="Typical use: `agent-collector install` (hooks into detected agents), then `agent-collector run`. "
               "Run `agent-collector COMMAND --help` for details.",
    )
    parser.add_argument("--version", action="version", version=f"agent-collector {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _modules_for(command):
        importlib.import_module(f"collector.cli.{name}").register(subparsers)
    return parser


def _missing_home(home: str | None) -> str | None:
    """A home that does not exist is an error, not an empty home that reports 0 entries."""
    if home is not None:
        return None if Path(home).expanduser().is_dir() else f"--home {home}: no such directory"
    env_home = os.environ.get("AGENT_COLLECTOR_HOME")
    if env_home and not Path(env_home).expanduser().is_dir():
        return f"AGENT_COLLECTOR_HOME={env_home}: no such directory"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    first = argv[0] if argv and not argv[0].startswith("-") else None  # the top level takes no other option
    args = build_parser(first).parse_args(argv)
    gc_tuning.tune()  # once the command's modules are imported, so that they are frozen too
    problem = _missing_home(getattr(args, "home", None))
    if problem:
        return fail(problem)
    stdout = sys.stdout
    if not getattr(args, "json", False):  # human output: every value escaped (JSON escapes its own)
        sys.stdout = TerminalWriter(stdout)
    try:
        return int(args.func(args) or 0)
    except CommandError as exc:
        return fail(str(exc), exc.code)
    except NotRegularFile as exc:  # one of our own files is a directory, a FIFO...: one clear line
        return fail(str(exc), 1)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    finally:
        sys.stdout = stdout


if __name__ == "__main__":
    sys.exit(main())
