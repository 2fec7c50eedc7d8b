"""Entry point: ``agent-collector <command>``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from collector import __version__
from collector.cli import (
    agents_cmd,
    collect_cmd,
    config_cmd,
    dashboard_cmd,
    deploy_cmd,
    doctor_cmd,
    live_cmd,
    quarantine_cmd,
    report_cmd,
    service_cmd,
    status_cmd,
)
from collector.cli.common import fail
from collector.util import gc_tuning

# Command modules, each with register(subparsers).
COMMAND_MODULES = (collect_cmd, agents_cmd, deploy_cmd, status_cmd, config_cmd, live_cmd, report_cmd, doctor_cmd,
                   dashboard_cmd, service_cmd, quarantine_cmd)


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
    for module in COMMAND_MODULES:
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
    gc_tuning.tune()
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
