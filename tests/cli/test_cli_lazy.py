"""A command imports only its own module: `agent-collector report` does not load the deploy engine, the
daemon or the other commands; `--help` and an unknown command still see every command."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from collector.cli.main import COMMAND_MODULES, build_parser

ROOT = Path(__file__).resolve().parents[2]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    return list(_subparsers(parser))


def _siblings(command: str) -> tuple[str, ...]:
    """The commands registered by ``command``'s module."""
    return next(commands for commands in COMMAND_MODULES.values() if command in commands)


def test_the_table_names_what_each_module_registers() -> None:
    for module, commands in COMMAND_MODULES.items():
        parser = argparse.ArgumentParser()
        importlib.import_module(f"collector.cli.{module}").register(parser.add_subparsers())
        assert tuple(_commands(parser)) == commands, module
    every = [c for commands in COMMAND_MODULES.values() for c in commands]
    assert _commands(build_parser()) == every and len(set(every)) == len(every)


@pytest.mark.parametrize("command", [c for commands in COMMAND_MODULES.values() for c in commands])
def test_a_command_alone_parses_as_in_the_full_parser(command: str) -> None:
    alone, full = build_parser(command), build_parser()
    assert tuple(_commands(alone)) == _siblings(command)
    assert _subparsers(alone)[command].format_help() == _subparsers(full)[command].format_help()


def test_agents_keeps_the_subcommands_deploy_adds() -> None:
    args = build_parser("agents").parse_args(["agents", "disable", "codex"])
    assert args.agent == "codex" and args.func.__module__ == "collector.cli.deploy_cmd"


LOADED = """
import sys
from collector.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(" ".join(sorted(m for m in sys.modules if m.startswith("collector."))))
"""


def _loaded(*argv: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", LOADED, *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=True)
    return set(done.stdout.split())


def test_report_loads_no_other_command_and_no_deploy_engine() -> None:
    loaded = _loaded("report", "--help")
    commands = {m.removeprefix("collector.cli.") for m in loaded if m.removeprefix("collector.cli.") in COMMAND_MODULES}
    assert commands == {"report_cmd"}
    heavy = ("collector.deploy", "collector.daemon.service", "collector.pipeline")
    assert not {m for m in loaded if m.startswith(heavy)}


def test_help_and_unknown_commands_see_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    from collector.cli.main import main

    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(f" {c} " in out or f" {c}\n" in out for cs in COMMAND_MODULES.values() for c in cs), out
    with pytest.raises(SystemExit):
        main(["statuss"])
    assert "choose from 'run', 'collect'" in capsys.readouterr().err


def test_collect_does_not_load_the_daemon_parts() -> None:
    """A backfill has no ingest server, dashboard, auto-deploy or watchdog: it does not import them."""
    loaded = _loaded("collect", "--once", "--help")
    assert "collector.cli.collect_cmd" in loaded
    assert not {m for m in loaded if m.startswith(("collector.dashboard", "collector.ingest.live",
                                                   "collector.deploy.autodeploy", "collector.deploy.watchdog",
                                                   "collector.cli.daemon_parts", "collector.cli.report_cmd"))}
