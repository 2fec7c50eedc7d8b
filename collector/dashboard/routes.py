"""The dashboard's routes on the ingest server: ``/dashboard`` (page and static assets from
``collector/data/dashboard``), ``/dashboard/login?key=`` (sets the cookie) and ``/v1/usage`` (JSON).

Browser rules, in place of the ingest's blanket refusal of browser requests: GET/HEAD only; a
``Sec-Fetch-Site`` other than ``same-origin`` or ``none`` (typed or opened from the terminal) is refused,
so is an ``Origin`` or ``Referer`` that is not this server's own origin. 127.0.0.1 on another port is
the same *site* but another *origin*, so a page of another local server gets 403 too. No CORS header is
ever sent; the page may not be framed; its CSP allows its own scripts and styles only. Data needs the
cookie (or the ``X-Agent-Collector-Token`` header); the static files hold no data.
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

from collector.dashboard.auth import cookie_value, set_cookie
from collector.dashboard.data import usage_view
from collector.ingest.secret import read_token, token_matches
from collector.ingest.server import HttpError, Request, Response
from collector.paths import Paths

PREFIX = "/dashboard"
USAGE = "/v1/usage"
ASSETS = ("index.html", "app.js", "app.css")
SECURITY = (
    ("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                                "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
)
_ALLOWED_SITES = ("same-origin", "none")


def asset(name: str) -> bytes:
    return resources.files("collector").joinpath("data", "dashboard", name).read_bytes()


class DashboardRoute:
    def __init__(self, paths: Paths, store: Path, snapshot: Callable[[], dict[str, Any]], capture: bool,
                 local_zone: Callable[[], tuple[tzinfo, str]],
                 own_prices: Mapping[str, Mapping[str, float]] | None = None) -> None:
        self.paths = paths
        self.own_prices = own_prices
        self.store = store
        self.snapshot = snapshot
        self.capture = capture
        self.local_zone = local_zone

    def owns(self, path: str) -> bool:
        return path in (USAGE, PREFIX) or path.startswith(PREFIX + "/")

    def check(self, request: Request, port: int) -> None:
        if request.method not in ("GET", "HEAD"):
            raise HttpError(405, "use GET")
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
        if path == PREFIX + "/login":
            return self._login(request)
        name = path[len(PREFIX) + 1:] or "index.html" if path != PREFIX else "index.html"
        if name not in ASSETS:
            raise HttpError(404, f"no dashboard file {name!r}")
        if name == "index.html" and not self._authorized(request):
            return _page(401, "Open the dashboard with the link `agent-collector dashboard` prints.")
        content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return Response(200, asset(name), f"{content_type}; charset=utf-8", SECURITY)

    def _authorized(self, request: Request) -> bool:
        token = read_token(self.paths)
        offered = request.headers.get("x-agent-collector-token") or cookie_value(request.headers.get("cookie"))
        return token_matches(token, offered)

    def _login(self, request: Request) -> Response:
        key = (request.query.get("key") or [""])[0]
        token = read_token(self.paths)
        if not token_matches(token, key):
            return _page(403, "This login link is not valid (any more): run `agent-collector dashboard` again.")
        assert token is not None
        target = (request.query.get("next") or [PREFIX])[0]
        if not (target == PREFIX or target.startswith(PREFIX + "?")):
            target = PREFIX  # never an open redirect
        return Response(303, b"", "text/plain", (("Location", target), ("Set-Cookie", set_cookie(token)), *SECURITY))

    def _usage(self, request: Request) -> Response:
        if not self._authorized(request):
            raise HttpError(401, "log in first: open the link `agent-collector dashboard` prints")
        days = _days(request)
        tz, name = self._zone(request)
        view = usage_view(self.store, self.snapshot(), tz, name, days, self.capture, time.time(),
                          self.own_prices)
        return Response(200, orjson.dumps(view), "application/json", SECURITY)

    def _zone(self, request: Request) -> tuple[tzinfo, str]:
        name = (request.query.get("tz") or [""])[0]
        if name:
            try:
                return ZoneInfo(name), name
            except (ZoneInfoNotFoundError, ValueError):
                raise HttpError(400, f"unknown time zone {quote(name)!r}") from None
        return self.local_zone()


def _days(request: Request) -> int:
    raw = (request.query.get("days") or ["30"])[0]
    if not raw.isdigit() or not 1 <= int(raw) <= 366:
        raise HttpError(400, "days must be 1..366")
    return int(raw)


def _page(status: int, message: str) -> Response:
    html = (f"<!doctype html><meta charset=utf-8><title>agent-collector</title>"
            f"<p>{message}</p>").encode()
    return Response(status, html, "text/html; charset=utf-8", SECURITY)
