"""``agent-collector dashboard``: print (or open) the login link of the daemon's local dashboard."""

from __future__ import annotations

import argparse
import sys
import webbrowser

from collector.cli.common import add_home, fail, paths_from
from collector.config import ConfigError, load_config


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dashboard", help="the local dashboard: print its login link (--open: open it in the browser)",
        description="The daemon serves a dashboard on 127.0.0.1 (the ingest port, path /dashboard): usage and "
                    "cost per day, per agent, model and project, live sessions, recent failures, health. "
                    "The link carries a one-time login code (valid 2 minutes, once) in its #fragment; the page "
                    "exchanges it for a dashboard token kept in that tab only (12 h, or until the daemon "
                    "restarts), which reads the dashboard and nothing else. No cookie is set.")
    add_home(parser)
    parser.add_argument("--open", action="store_true", help="open the link in the default browser")
    parser.set_defaults(func=cmd_dashboard)


def cmd_dashboard(args: argparse.Namespace) -> int:
    from collector.cli.status_cmd import _daemon_pid
    from collector.dashboard.auth import CODE_TTL_S, issue_code
    from collector.ingest.owner import refuse_reason
    from collector.ingest.secret import daemon_port

    paths = paths_from(args)
    try:
        config = load_config(paths.config_file)
    except ConfigError as exc:
        return fail(str(exc))
    if not config.ingest.enabled:
        return fail("the ingest server is disabled ([ingest] enabled = false); the dashboard is served by it", 1)
    port = daemon_port(paths, config.ingest.port)
    refused = refuse_reason(port)
    if refused is not None:
        return fail(refused.replace("nothing was sent to it", "no login link was made for it"), 1)
    try:
        code = issue_code(paths)
    except OSError as exc:
        return fail(f"cannot write the login code under {paths.state_dir}: {exc.strerror or exc}", 1)
    url = f"http://127.0.0.1:{port}/dashboard/#code={code}"
    if _daemon_pid(paths) is None:
        sys.stderr.write("agent-collector: the daemon is not running; start it (`agent-collector service start` "
                         "or `agent-collector run`), then open:\n")
    print(url)
    sys.stderr.write(f"agent-collector: the link works once, within {CODE_TTL_S / 60:.0f} minutes\n")
    if args.open:
        webbrowser.open(url)
    return 0
