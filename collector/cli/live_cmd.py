"""``agent-collector sessions``: the live per-session status from the running daemon (GET /v1/sessions)."""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from collector.cli.common import add_home, add_json, fail, paths_from, print_json, print_table
from collector.config import ConfigError, load_config
from collector.ingest.owner import refuse_reason
from collector.ingest.secret import daemon_port, read_token
from collector.ingest.server import TOKEN_HEADER
from collector.util.short_ids import shortest_unique

LABELS = {"waiting_for_input": "WAITING", "ready_for_review": "review", "error": "ERROR"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "sessions", help="live sessions: status, tokens, tool calls, errors (from the running daemon)",
        description="Asks the running daemon (loopback ingest server, GET /v1/sessions) for every session "
                    "it has seen: agent, status (idle, running, waiting_for_input, ready_for_review, closed, "
                    "error), today's tokens, tool calls and errors. Shows the live ones (active within the agent's "
                    "idle timeout; 30 min for agents without one) unless --all. Needs `agent-collector run`.",
    )
    add_home(parser)
    add_json(parser)
    parser.add_argument("--url", help="daemon address (default: http://127.0.0.1:<ingest.port>)")
    parser.add_argument("--all", action="store_true",
                        help="include closed sessions and those idle past their agent's idle timeout")
    parser.set_defaults(func=cmd_sessions)


def daemon_url(args: argparse.Namespace) -> str:
    if args.url:
        return str(args.url).rstrip("/")
    paths = paths_from(args)
    try:
        configured = load_config(paths.config_file).ingest.port
    except ConfigError:
        configured = 0
    return f"http://127.0.0.1:{daemon_port(paths, configured)}"


def fetch_sessions(url: str, token: str | None, timeout: float = 3.0) -> list[dict[str, Any]]:
    refused = _foreign_listener(url)
    if refused:
        raise PermissionError(refused)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy
    request = urllib.request.Request(f"{url}/v1/sessions", headers={TOKEN_HEADER: token or ""})
    with opener.open(request, timeout=timeout) as response:
        data = json.loads(response.read())
    sessions = data.get("sessions") if isinstance(data, dict) else None
    if not isinstance(sessions, list):
        raise ValueError("the daemon answered something that is not a sessions list")
    return sessions


def _foreign_listener(url: str) -> str | None:
    """Why the token must not go to ``url``: a loopback port another user listens on (``ingest.owner``)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.hostname not in ("127.0.0.1", "localhost", "::1") or not parsed.port:
        return None
    return refuse_reason(parsed.port)


def _ago(ns: Any) -> str:
    if not isinstance(ns, int) or ns <= 0:
        return ""
    seconds = max(0, int(time.time() - ns / 1e9))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def cmd_sessions(args: argparse.Namespace) -> int:
    url = daemon_url(args)
    try:
        sessions = fetch_sessions(url, read_token(paths_from(args)))
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            return fail(f"the daemon at {url} refused our secret (HTTP 401): it is another user's or another "
                        f"home's daemon, or ours was started with a different ingest.token", 1)
        return fail(f"the daemon at {url} answered HTTP {exc.code}", 1)
    except PermissionError as exc:  # another user listens there: nothing was sent
        return fail(str(exc), 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return fail(f"no daemon answers at {url} ({reason}); start it with `agent-collector run`", 1)
    if not args.all:  # live: active within the agent's idle timeout (older daemons: not closed)
        sessions = [s for s in sessions if s.get("live", s.get("status") != "closed")]
    if args.json:
        print_json({"sessions": sessions})
        return 0
    if not sessions:
        print("no live sessions" + ("" if args.all else " (closed and idle-timed-out ones hidden; --all shows them)"))
        return 0
    short = shortest_unique(str(s.get("session_id", "")) for s in sessions)
    rows = [[
        s.get("agent"), short[str(s.get("session_id", ""))], LABELS.get(str(s.get("status")), s.get("status")),
        _ago(s.get("status_since_unix_nano")), os.path.basename(str(s.get("workspace") or "").rstrip("/")),
        s.get("input_tokens_today", 0), s.get("output_tokens_today", 0), s.get("tool_calls_today", 0),
        s.get("errors_today", 0),
    ] for s in sessions]
    headers = ["agent", "session", "status", "since", "workspace", "in tok", "out tok", "tools", "errors"]
    print_table(headers, rows)
    return 0
