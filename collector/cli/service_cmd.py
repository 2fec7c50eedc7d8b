"""``agent-collector service start|stop|restart|status|logs [-f]``: the installed user service."""

from __future__ import annotations

import argparse

from collector.cli.common import add_home, checked_config, fail, paths_from
from collector.deploy.service_ctl import ACTIONS, NoService, control_for, run_action


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "service", help="start, stop, restart the installed service; its status and log",
        description="Controls the service deploy/install.sh installed, whichever mode it chose: the systemd "
                    "user unit (systemctl --user, journalctl), the launchd agent (launchctl, the log file) "
                    "or the background process (its supervisor restarts a daemon that dies). `status` exits "
                    "3 when the daemon is not running and says why.")
    parser.add_argument("action", choices=ACTIONS)
    parser.add_argument("-f", "--follow", action="store_true", help="logs: keep printing new lines")
    add_home(parser)
    parser.set_defaults(func=cmd_service)


def cmd_service(args: argparse.Namespace) -> int:
    if args.follow and args.action != "logs":
        return fail("-f goes with `service logs`")
    paths = paths_from(args)
    if args.action in ("start", "restart"):
        checked_config(paths, refusal="not started: ")  # a daemon that would exit at once is not started
    try:
        ctl = control_for(paths)
    except NoService as exc:
        return fail(str(exc), code=1)
    return run_action(ctl, args.action, follow=args.follow)
