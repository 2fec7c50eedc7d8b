"""The detail reports of ``agent-collector report``: ``tools``, ``session ID``, ``models --compare`` (or
``model --compare``) and ``findings``, read from the store's per-entry rows (docs/reports.md)."""

from __future__ import annotations

import argparse
import sqlite3
import time
from typing import Any

from collector.usage.findings import Thresholds, build_findings
from collector.usage.model_compare import build_compare
from collector.usage.prices import PriceTable
from collector.usage.report import JSON_VERSION, ReportRequest
from collector.usage.session_detail import build_session
from collector.usage.tool_report import build_tools

DETAIL_KINDS = ("tools", "findings", "models")
_DEFAULTS = Thresholds()


def add_detail_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--compare", action="store_true",
                        help="with model(s): compare the models on your own work (tokens, cost, tool failure rate, "
                             "turns per task)")
    parser.add_argument("--repeat-at", type=int, default=_DEFAULTS.repeat_at, metavar="N",
                        help="findings: same tool, same arguments this many times in one context is a repeated read")
    parser.add_argument("--retry-at", type=int, default=_DEFAULTS.retry_at, metavar="N",
                        help="findings: this many failures of one tool in a row is a retry loop")
    parser.add_argument("--dominant-tokens", type=int, default=_DEFAULTS.dominant_tokens, metavar="N",
                        help="findings: the least estimated context tokens for a tool to be called dominant")


def is_detail(args: argparse.Namespace) -> bool:
    kind = args.kind or getattr(args, "by", None)
    return kind in DETAIL_KINDS or (kind == "model" and args.compare) or (kind == "session" and bool(args.target))


def _thresholds(args: argparse.Namespace) -> Thresholds:
    for name in ("repeat_at", "retry_at", "dominant_tokens"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
    return Thresholds(repeat_at=args.repeat_at, retry_at=args.retry_at, dominant_tokens=args.dominant_tokens)


def detail_report(db: sqlite3.Connection, args: argparse.Namespace, request: ReportRequest,
                  prices: PriceTable) -> dict[str, Any]:
    """The report ``args`` ask for; ValueError for a session that is not there or an argument out of range."""
    kind = args.kind or args.by
    if kind == "session":
        body = build_session(db, str(args.target), request.tz, prices)
    elif kind == "tools":
        body = build_tools(db, request.filters)
    elif kind == "findings":
        body = build_findings(db, request.filters, _thresholds(args))
    else:
        body = build_compare(db, request.filters, prices)
    return {**body, "version": JSON_VERSION, "timezone": request.tz_name, "since": request.since,
            "until": request.until, "agents": list(request.filters.agents), "generated_unix": time.time()}
