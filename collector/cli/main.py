"""Entry point: ``agent-collector <command>``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from collector import __version__
from collector.cli.common import fail

# Command modules, each with register(subparsers). Optional ones are skipped if absent from this build.
COMMAND_MODULES = [
    "collector.cli.collect_cmd",
    "collector.cli.agents_cmd",
    "collector.cli.deploy_cmd",
    "collector.cli.status_cmd",
    "collector.cli.config_cmd",
    "collector.cli.live_cmd",
    "collector.cli.report_cmd",
    "collector.cli.doctor_cmd",
    "collector.cli.service_cmd",
]


def build_parser() -> argparse.ArgumentParser:
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
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(subparsers)
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
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = _missing_home(getattr(args, "home", None))
    if problem:
        return fail(problem)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
