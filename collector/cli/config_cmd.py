"""``agent-collector config``: where the config lives, what is in effect, a default file."""

from __future__ import annotations

import argparse
import sys

from collector.cli.common import add_home, checked_config, paths_from, print_json
from collector.config import DEFAULT_FILE
from collector.util.atomic import atomic_write


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("config", help="show paths and effective configuration, or write a default file")
    sub = parser.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    show = sub.add_parser("show", help="paths and the configuration in effect (file + environment)")
    add_home(show)
    show.set_defaults(func=cmd_show)
    check = sub.add_parser("check", help="check config.toml, the AGENT_COLLECTOR_* variables and agents.d; "
                                         "exit 2 with one line naming the problem")
    add_home(check)
    check.set_defaults(func=cmd_check)
    init = sub.add_parser("init", help="write a commented default config.toml if none exists")
    add_home(init)
    init.set_defaults(func=cmd_init)


def cmd_show(args: argparse.Namespace) -> int:
    paths = paths_from(args)
    config = checked_config(paths)
    print_json({"paths": {"home": str(paths.home), "config_file": str(paths.config_file),
                          "data_dir": str(paths.data_dir), "spool_dir": str(paths.spool_dir),
                          "output_dir": str(paths.output_dir)}, "config": config.as_dict()})
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    paths = paths_from(args)
    checked_config(paths)
    print(f"config ok: {paths.config_file}{'' if paths.config_file.exists() else ' (absent: defaults)'}")
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    paths = paths_from(args)
    if paths.config_file.exists():
        sys.stderr.write(f"{paths.config_file} exists; left as it is\n")
        return 0
    atomic_write(paths.config_file, DEFAULT_FILE.encode("utf-8"), mode=0o600)
    print(f"wrote {paths.config_file}")
    return 0
