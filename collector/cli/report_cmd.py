"""``agent-collector report daily|weekly|monthly|session|model|agent|project|repo|branch|worktree|blocks`` (or
``--by KIND``): usage and cost from the local usage store; and the detail reports ``report tools``, ``report session
ID``, ``report models --compare`` and ``report findings`` (``collector.cli.report_detail``)."""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
from datetime import date, datetime, timedelta, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from collector.cli.common import add_home, fail, paths_from, print_json
from collector.cli.report_detail import DETAIL_KINDS, add_detail_arguments, detail_report, is_detail
from collector.config import ConfigError, load_config
from collector.exporters.usage import store_settings
from collector.usage.prices import CACHE_NAME, PriceTable
from collector.usage.query import KINDS, Filters
from collector.usage.render import table_lines
from collector.usage.render_detail import detail_lines
from collector.usage.report import ReportRequest, build_report
from collector.usage.store import connect, store_file
from collector.util.timezones import local_zone


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report", help="usage and cost per day, week, month, session, model, agent, project, git repository, "
                       "branch, worktree or 5-hour block",
        description="Tokens (input with cache reads and writes apart, output, reasoning), model calls, tool "
                    "calls, tool failures and cost, from the local usage store. Cost comes from the bundled "
                    "genai-prices table (offline); models it does not know are shown as unpriced. repo, branch "
                    "and worktree group by the git repository (its normalised remote URL), branch and working "
                    "tree the session's directory was in when each entry was collected; (none) is outside git. "
                    "The detail reports: tools (per tool: calls, failures, time, result size and the estimated "
                    "context tokens its results cost the later model calls), session ID (one session turn by turn, "
                    "subagents rolled up into the turn that started them), models --compare (tokens, cost, cache "
                    "hit rate, tool failure rate, turns per task by model) and findings (a tool whose output "
                    "dominates the context, repeated reads, retry loops, each with evidence and a suggestion).")
    parser.add_argument("kind", nargs="?", choices=KINDS + DETAIL_KINDS,
                        help="how to group (or --by); tools, findings, models --compare and session ID: the detail "
                             "reports (docs/reports.md)")
    parser.add_argument("target", nargs="?", metavar="ID", help="with session: the one session to show turn by turn "
                                                               "(its id or a unique start of it)")
    parser.add_argument("--by", choices=KINDS, metavar="KIND", help=f"how to group: {', '.join(KINDS)}")
    parser.add_argument("--since", metavar="DATE", help="first day included (YYYY-MM-DD or YYYYMMDD)")
    parser.add_argument("--until", metavar="DATE", help="last day included (YYYY-MM-DD or YYYYMMDD)")
    parser.add_argument("--agent", action="append", default=[], metavar="ID", help="only this agent (repeatable)")
    parser.add_argument("--project", metavar="PATH", help="only sessions in this workspace (full path or last part)")
    parser.add_argument("--repo", metavar="REPO", help="only entries of this git repository (its remote URL as "
                                                       "reports show it, or the last part: app)")
    parser.add_argument("--branch", metavar="NAME", help="only entries on this git branch")
    parser.add_argument("--timezone", metavar="TZ", help="IANA time zone for days and times (default: local)")
    parser.add_argument("--breakdown", action="store_true", help="a line per model under each row")
    parser.add_argument("--json", action="store_true", help="print JSON (docs/reports.md) instead of a table")
    add_detail_arguments(parser)
    parser.add_argument("--store", metavar="FILE", help="the usage store to read (default: from the config)")
    add_home(parser)
    parser.set_defaults(func=cmd_report)


def parse_day(text: str) -> date:
    for fmt in ("%Y-%m-%d", "%Y%m%d"):
        try:
            return datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    raise ValueError(f"{text!r} is not a date (YYYY-MM-DD or YYYYMMDD)")


def _midnight_ns(day: date, tz: tzinfo) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=tz).timestamp()) * 10**9


def report_kind(args: argparse.Namespace) -> str:
    """The grouping, named as the positional ``kind`` or by ``--by`` (one of them, or both alike)."""
    by = getattr(args, "by", None)
    if args.kind and by and args.kind != by:
        raise ValueError(f"two groupings named: {args.kind} and --by {by}")
    kind = args.kind or by
    if not kind:
        raise ValueError(f"name how to group: report KIND or report --by KIND ({', '.join(KINDS)})")
    return str(kind)


def build_request(args: argparse.Namespace) -> ReportRequest:
    kind = report_kind(args)
    if getattr(args, "target", None) and kind != "session":
        raise ValueError(f"an ID goes with report session, not report {kind}")
    if args.timezone:
        try:
            tz: tzinfo = ZoneInfo(args.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {args.timezone!r} (an IANA name such as Europe/Berlin)") from None
        tz_name = args.timezone
    else:
        tz, tz_name = local_zone()
    since = parse_day(args.since) if args.since else None
    until = parse_day(args.until) if args.until else None
    filters = Filters(
        since_ns=_midnight_ns(since, tz) if since else None,
        until_ns=_midnight_ns(until + timedelta(days=1), tz) if until else None,
        agents=tuple(args.agent), project=args.project, repo=getattr(args, "repo", None) or None,
        branch=getattr(args, "branch", None) or None)
    return ReportRequest(kind, filters, tz, tz_name, since.isoformat() if since else None,
                         until.isoformat() if until else None)


def report_settings(args: argparse.Namespace) -> tuple[Path, dict[str, dict[str, float]]]:
    """The usage store (``--store`` or the config's) and the user's ``[prices]``."""
    paths = paths_from(args)
    try:  # the [store] and [prices] sections are all a report needs: skip loading the agent definitions
        config = load_config(paths.config_file, known_agents=())
    except ConfigError:  # e.g. an [agents.<id>] section: check it against the real definitions
        config = load_config(paths.config_file)
    if getattr(args, "store", None):
        return Path(args.store), config.prices
    return store_file(paths.data_dir, store_settings(config)), config.prices


def cmd_report(args: argparse.Namespace) -> int:
    try:
        request = build_request(args)
        path, own_prices = report_settings(args)
    except (ValueError, ConfigError) as exc:
        return fail(str(exc))
    if not path.is_file():
        return fail(f"no usage store at {path} yet: start the daemon (`agent-collector run`) or run "
                    f"`agent-collector collect --once`", 1)
    try:
        db = connect(path, readonly=True)
        prices = PriceTable(path.with_name(CACHE_NAME), own_prices)
        try:
            report = detail_report(db, args, request, prices) if is_detail(args) else build_report(db, request, prices)
        except ValueError as exc:
            return fail(str(exc), 1)
        finally:
            db.close()
        prices.save()
    except sqlite3.Error as exc:
        return fail(f"cannot read the usage store {path}: {exc}", 1)
    if args.json:
        print_json(report)
        return 0
    width = shutil.get_terminal_size((120, 24)).columns if sys.stdout.isatty() else 120
    lines = detail_lines(report) if is_detail(args) else table_lines(report, args.breakdown, width)
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
