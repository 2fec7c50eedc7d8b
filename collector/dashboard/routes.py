"""The dashboard's routes on the ingest server: ``/dashboard`` (page and static assets from
``collector/data/dashboard``, no data in them), ``POST /dashboard/session`` (a one-time login code for
a dashboard token, see :mod:`collector.dashboard.auth`) and ``/v1/usage`` (JSON).

Browser rules, in place of the ingest's blanket refusal of browser requests: GET/HEAD only, but for
the login exchange; a ``Sec-Fetch-Site`` other than ``same-origin`` or ``none`` (typed or opened from
the terminal) is refused, so is an ``Origin`` or ``Referer`` that is not this server's own origin.
127.0.0.1 on another port is the same *site* but another *origin*, so a page of another local server
gets 403 too. No CORS header is ever sent; the page may not be framed; its CSP allows its own scripts
and styles only. Data needs the dashboard token (``X-Agent-Collector-Dashboard``) or, for programs, the
ingest token (``X-Agent-Collector-Token``); no cookie is ever set or read.
"""

from __future__ import annotations

import mimetypes
import time
from collections.abc import Callable, Mapping
from datetime import tzinfo
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson

from collector.dashboard.auth import LOGIN_HEADER, SESSION_HEADER, DashboardSessions, redeem_code
from collector.dashboard.data import usage_view
from collector.dashboard.sessions import BadQuery, WorkViews
from collector.ingest.secret import read_token, token_matches
from collector.ingest.server import HttpError, Request, Response
from collector.paths import Paths

PREFIX = "/dashboard"
USAGE = "/v1/usage"
WORK = (USAGE + "/sessions", USAGE + "/timeline", USAGE + "/activity")  # collector.dashboard.sessions
SESSION = PREFIX + "/session"
ASSETS = ("index.html", "app.js", "work.js", "app.css")
SECURITY = (
    ("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                                "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
)
_ALLOWED_SITES = ("same-origin", "none")
MAX_LABEL = 2048  # a repository URL is at most collector.util.git_url.MAX_URL


def asset(name: str) -> bytes:
    return resources.files("collector").joinpath("data", "dashboard", name).read_bytes()


class DashboardRoute:
    def __init__(self, paths: Paths, store: Path, snapshot: Callable[[], dict[str, Any]], capture: bool,
                 local_zone: Callable[[], tuple[tzinfo, str]],
                 own_prices: Mapping[str, Mapping[str, float]] | None = None,
                 sessions: DashboardSessions | None = None) -> None:
        self.paths = paths
        self.sessions = sessions or DashboardSessions()
        self.own_prices = own_prices
        self.store = store
        self.snapshot = snapshot
        self.capture = capture
        self.local_zone = local_zone
        self.work = WorkViews(store, capture, own_prices)

    def owns(self, path: str) -> bool:
        return path in (USAGE, PREFIX, *WORK) or path.startswith(PREFIX + "/")

    def check(self, request: Request, port: int) -> None:
        wanted = ("POST",) if request.path == SESSION else ("GET", "HEAD")
        if request.method not in wanted:
            raise HttpError(405, f"use {wanted[0]}")
        headers = request.headers
        site = headers.get("sec-fetch-site")
        if site is not None and site not in _ALLOWED_SITES:
            raise HttpError(403, f"cross-origin requests are refused (Sec-Fetch-Site: {site})")
        own = f"http://{headers.get('host', '')}"
        origin = headers.get("origin")
        if origin is not None and origin != own:
            raise HttpError(403, "cross-origin requests are refused (Origin)")
        referer = headers.get("referer")
        if referer is not None and referer != own and not referer.startswith(own + "/"):
            raise HttpError(403, "cross-origin requests are refused (Referer)")

    def handle(self, request: Request) -> Response:
        path = request.path
        if path == USAGE:
            return self._usage(request)
        if path in WORK:
            return self._work(request)
        if path == SESSION:
            return self._session(request)
        name = path[len(PREFIX) + 1:] or "index.html" if path != PREFIX else "index.html"
        if name not in ASSETS:
            raise HttpError(404, f"no dashboard file {name!r}")
        content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return Response(200, asset(name), f"{content_type}; charset=utf-8", SECURITY)

    def _authorized(self, request: Request) -> bool:
        if self.sessions.valid(request.headers.get(SESSION_HEADER.lower())):
            return True
        offered = request.headers.get("x-agent-collector-token")
        return offered is not None and token_matches(read_token(self.paths), offered)

    def _session(self, request: Request) -> Response:
        """The login exchange: a fresh one-time code for a dashboard token (JSON), once."""
        if request.headers.get("sec-fetch-site") not in (None, "same-origin"):
            raise HttpError(403, "the login code is taken from the dashboard's own page only")
        if not redeem_code(self.paths, request.headers.get(LOGIN_HEADER.lower())):
            raise HttpError(403, "this login link is not valid (any more): run `agent-collector dashboard` again")
        token, ttl = self.sessions.grant()
        body = orjson.dumps({"token": token, "header": SESSION_HEADER, "expires_in_s": ttl})
        return Response(200, body, "application/json", (("Cache-Control", "no-store"), *SECURITY))

    def _usage(self, request: Request) -> Response:
        if not self._authorized(request):
            raise HttpError(401, "log in first: open the link `agent-collector dashboard` prints "
                                 "(a dashboard login lasts 12 h, or until the daemon restarts)")
        days = _days(request)
        tz, name = self._zone(request)
        view = usage_view(self.store, self.snapshot(), tz, name, days, self.capture, time.time(),
                          self.own_prices, repo=_label(request, "repo"), branch=_label(request, "branch"),
                          prices=self.work.prices())
        return Response(200, orjson.dumps(view), "application/json", SECURITY)

    def _work(self, request: Request) -> Response:
        """The sessions list, a session's timeline or the activity (``collector.dashboard.sessions``)."""
        if not self._authorized(request):
            raise HttpError(401, "log in first: open the link `agent-collector dashboard` prints")
        tz, _ = self._zone(request)
        try:
            if request.path == WORK[0]:
                view: dict[str, Any] | None = self.work.sessions(request.query, tz, self.snapshot())
            elif request.path == WORK[1]:
                view = self.work.timeline(request.query, tz)
            else:
                view = self.work.activity(request.query, tz, self.snapshot())
        except BadQuery as err:
            raise HttpError(400, str(err)) from None
        if view is None:
            raise HttpError(404, "no such session in the usage store")
        return Response(200, orjson.dumps(view), "application/json", SECURITY)

    def _zone(self, request: Request) -> tuple[tzinfo, str]:
        name = (request.query.get("tz") or [""])[0]
        if name:
            try:
                return ZoneInfo(name), name
            except (ZoneInfoNotFoundError, ValueError):
                raise HttpError(400, f"unknown time zone {quote(name)!r}") from None
        return self.local_zone()


def _label(request: Request, key: str) -> str | None:
    """A ``repo``/``branch`` filter of the query: text of at most ``MAX_LABEL`` characters, no control
    characters; empty or absent is no filter."""
    value = (request.query.get(key) or [""])[0]
    if len(value) > MAX_LABEL or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise HttpError(400, f"{key} must be at most {MAX_LABEL} characters, without control characters")
    return value or None


def _days(request: Request) -> int:
    raw = (request.query.get("days") or ["30"])[0]
    if not raw.isdigit() or not 1 <= int(raw) <= 366:
        raise HttpError(400, "days must be 1..366")
    return int(raw)

