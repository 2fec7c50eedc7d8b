"""The loopback HTTP ingest server: agents' http hooks post here, the CLI and the Agentty panel read here.

A deliberately small HTTP/1.1 server on asyncio streams, strict about what it accepts:

* it binds 127.0.0.1 (or another loopback address) only and refuses to start on anything else;
* ``Host`` must name loopback (127.0.0.1, localhost, [::1]) and, when it has a port, ours: a page
  that rebinds a DNS name to 127.0.0.1 still sends its own name;
* a request with ``Origin``, ``Referer`` or any ``Sec-Fetch-*`` header comes from a browser and is
  refused (403); no CORS header is ever sent, so no web page can post here or read an answer;
* bodies need ``Content-Length`` (``Transfer-Encoding`` gets 411; the body routes also take
  ``Transfer-Encoding: chunked``, ``collector.ingest.wire.read_body``); a length over the cap gets 413
  before a byte of the body is read, and the connection is closed;
* every request must carry the user's secret in ``X-Agent-Collector-Token`` (compared in constant
  time); without it, or with another user's, the answer is 401 and the refusal is counted;
* keep-alive (HTTP/1.1 default), with time limits on headers, bodies and idle connections; when
  ``max_connections`` are open, a new connection closes the longest-idle kept-alive one (counted as
  ``idle_closed``), else the oldest one that has not finished its first request head, so has shown
  no token yet (``unauthenticated_closed``: half-open connections cannot lock real clients out), and
  is served; only when every connection is busy with a request is it answered 503.

Routes: ``POST /v1/hooks/<agent>[?event=<name>]`` hands the raw body to ``submit`` and answers ``{}``
(an unknown agent gets 404 naming the known ones); ``GET /v1/status`` and ``GET /v1/sessions`` answer
the daemon's live picture from ``snapshot()``. Body routes (the OTLP receiver,
``collector.ingest.otlp_route``) own their paths, are checked like the hooks (token, no browser) and
answer a posted body themselves. Extra routes (the dashboard, ``collector.dashboard``)
own their paths: they replace the browser refusal with their own same-origin rules (the Host check
stays) and are answered from a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import inspect
import ipaddress
import logging
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from collector.ingest.owner import peer_uid
from collector.ingest.wire import (  # noqa: F401 - the wire's names, as they were imported from here
    HttpError,
    Request,
    Response,
    body_length,
    parse_head,
    read_body,
    split_host,
    with_event_name,
)

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4319  # next to OTLP's 4317 (gRPC) and 4318 (HTTP), which a local OTel collector may hold
HOOK_PREFIX = "/v1/hooks/"
TOKEN_HEADER = "X-Agent-Collector-Token"

Submit = Callable[[str, bytes, float], Awaitable[None] | None]

_REASONS = {
    200: "OK", 303: "See Other", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout", 411: "Length Required", 413: "Content Too Large",
    431: "Request Header Fields Too Large", 503: "Service Unavailable", 505: "HTTP Version Not Supported",
}
_LOOPBACK_NAMES = ("localhost",)


@dataclass(frozen=True, slots=True)
class IngestConfig:
    token: str = ""  # required: the per-user secret (collector.ingest.secret)
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    max_body_bytes: int = 1024 * 1024
    otlp_max_bytes: int = 4 * 1024 * 1024  # an OTLP request, on the wire and once decompressed
    spool_max_line: int = 16 * 1024 * 1024  # what the spool sources read (collector.max_line_bytes)
    max_header_bytes: int = 16 * 1024
    header_timeout_s: float = 5.0
    body_timeout_s: float = 10.0
    idle_timeout_s: float = 30.0
    max_connections: int = 128


class BodyRoute(Protocol):
    max_body_bytes: int

    def owns(self, path: str) -> bool:
        """Is ``path`` this route's?"""

    async def post(self, request: Request, body: bytes, received: float) -> Response:
        """Answer a posted body (on the event loop; raise HttpError to refuse)."""


class Route(Protocol):
    def owns(self, path: str) -> bool:
        """Is ``path`` this route's?"""

    def check(self, request: Request, port: int) -> None:
        """Raise HttpError unless the request may be answered (replaces the browser refusal)."""

    def handle(self, request: Request) -> Response:
        """Answer (runs in a worker thread)."""


def check_loopback(host: str) -> None:
    """Raise ValueError unless ``host`` is a loopback address (or ``localhost``)."""
    if host in _LOOPBACK_NAMES:
        return
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise ValueError(f"ingest host {host!r} is not a loopback address (use 127.0.0.1)") from None
    if not address.is_loopback:
        raise ValueError(f"ingest host {host!r} is not a loopback address: the ingest server binds "
                         f"loopback only (use 127.0.0.1)")


class IngestServer:
    def __init__(self, submit: Submit, known_agents: Callable[[], set[str]],
                 snapshot: Callable[[], dict[str, Any]], config: IngestConfig | None = None,
                 routes: Sequence[Route] = (), body_routes: Sequence[BodyRoute] = ()) -> None:
        self.config = config or IngestConfig()
        self._routes = list(routes)
        self._body_routes = list(body_routes)
        check_loopback(self.config.host)
        if not self.config.token:
            raise ValueError("the ingest server needs the user's secret (IngestConfig.token)")
        self._token = self.config.token.encode()
        self._submit = submit
        self._known_agents = known_agents
        self._snapshot = snapshot
        self._server: asyncio.base_events.Server | None = None
        self._connections = 0
        self._counts: Counter[str] = Counter()
        self._bytes = 0
        self._started = 0.0
        self._hosts: dict[str, bool] = {}
        self._writers: set[asyncio.StreamWriter] = set()
        self._idle: dict[asyncio.StreamWriter, None] = {}  # kept-alive, waiting for a request; oldest first
        self._unproven: dict[asyncio.StreamWriter, None] = {}  # no first request head yet; oldest first

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        host = "127.0.0.1" if self.config.host == "localhost" else self.config.host
        self._server = await asyncio.start_server(
            self._handle, host=host, port=self.config.port, limit=self.config.max_header_bytes,
            reuse_address=True,
        )
        self._started = time.time()
        log.info("ingest server listening on %s", self.url)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):  # idle keep-alive connections end now, not at loop exit
                writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None

    async def __aenter__(self) -> IngestServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            return self.config.port
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def bound_addresses(self) -> list[str]:
        return [str(s.getsockname()[0]) for s in (self._server.sockets if self._server else ())]

    @property
    def url(self) -> str:
        host = self.bound_addresses[0] if self.bound_addresses else self.config.host
        return f"http://{host}:{self.port}"

    def stats(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "started_unix": self._started or None,
            "connections": self._connections,
            "bytes_accepted": self._bytes,
            "requests": dict(self._counts),
        }

    # -- connections -------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections += 1
        self._writers.add(writer)
        try:
            if self._connections > self.config.max_connections and not self._close_idle():
                self._counts["rejected_too_many_connections"] += 1
                await self._respond(writer, 503, {"error": "too many connections"}, close=True)
                return
            keep_alive = True
            first = True
            while keep_alive:
                keep_alive = await self._one_request(reader, writer, first)
                first = False
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:  # never let one connection take the server down
            log.exception("ingest connection failed")
        finally:
            self._connections -= 1
            self._writers.discard(writer)
            self._idle.pop(writer, None)
            self._unproven.pop(writer, None)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _close_idle(self) -> bool:
        """Make room: close the longest-idle kept-alive connection (its client opens a new one when it
        has something to say), else the oldest that has sent no request head yet. False when every
        connection is busy with a request."""
        for waiting, count in ((self._idle, "idle_closed"), (self._unproven, "unauthenticated_closed")):
            for writer in waiting:
                del waiting[writer]
                self._counts[count] += 1
                writer.close()
                return True
        return False

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                           first: bool) -> bool:
        timeout = self.config.header_timeout_s if first else self.config.idle_timeout_s
        (self._unproven if first else self._idle)[writer] = None
        try:
            async with asyncio.timeout(timeout):  # no extra task per read, unlike wait_for
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip() and not writer.is_closing():  # closing: we closed it to make room
                self._counts["rejected_bad_request"] += 1
            return False
        except asyncio.LimitOverrunError:
            self._counts["rejected_headers_too_large"] += 1
            await self._respond(writer, 431, {"error": "request headers too large"}, close=True)
            return False
        except TimeoutError:
            if not first:
                return False  # an idle keep-alive connection
            self._counts["rejected_timeout"] += 1
            await self._respond(writer, 408, {"error": "request headers too slow"}, close=True)
            return False
        self._idle.pop(writer, None)
        self._unproven.pop(writer, None)
        try:
            request = parse_head(head)
            self._check(request, writer)
            return await self._route(request, reader, writer)
        except HttpError as err:
            self._counts[f"rejected_{err.status}"] += 1
            await self._respond(writer, err.status, {"error": str(err)}, close=True)
            return False

    def _extra(self, path: str) -> Route | None:
        return next((r for r in self._routes if r.owns(path)), None)

    def _check(self, request: Request, writer: asyncio.StreamWriter | None = None) -> None:
        headers = request.headers
        host = headers.get("host")
        if host is None or not self._host_ok(host):
            raise HttpError(403, "Host must be a loopback address with this server's port")
        route = self._extra(request.path)
        if route is not None:
            route.check(request, self.port)  # an extra route checks its credential its own way
            return
        browser = [h for h in headers if h in ("origin", "referer") or h.startswith("sec-fetch-")]
        if browser:
            raise HttpError(403, f"browser requests are refused ({', '.join(sorted(browser))})")
        given = headers.get(TOKEN_HEADER.lower(), "").strip().encode("latin-1")
        if not hmac.compare_digest(self._token, given) and not self._own_user_posts(request, writer):
            raise HttpError(401, f"missing or wrong {TOKEN_HEADER} (the secret is in <state dir>/ingest.token)")

    def _own_user_posts(self, request: Request, writer: asyncio.StreamWriter | None) -> bool:
        """A body route's request (the OTLP receiver) without the token is taken from a loopback client
        socket that our own user owns (``/proc/net/tcp``): an agent's telemetry settings then need no
        secret (docs/otlp-receiver.md, "Who may post"). Anything else, or an unknown owner, needs the token."""
        if writer is None or not any(r.owns(request.path) for r in self._body_routes):
            return False
        peer = writer.get_extra_info("peername")
        if not isinstance(peer, tuple) or len(peer) < 2 or not isinstance(peer[1], int):
            return False
        if peer_uid(peer[1], self.port) != os.getuid():
            return False
        self._counts["otlp_same_user"] += 1
        return True

    def _host_ok(self, host: str) -> bool:
        known = self._hosts.get(host)
        if known is None:
            known = self._check_host(host)
            if len(self._hosts) < 64:  # clients send one or two spellings; do not grow on junk
                self._hosts[host] = known
        return known

    def _check_host(self, host: str) -> bool:
        parsed = split_host(host)
        if parsed is None:
            return False
        name, port = parsed
        if port and port != str(self.port):
            return False
        if name.lower() in _LOOPBACK_NAMES:
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False

    # -- routes ------------------------------------------------------------------------------------

    async def _route(self, request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> bool:
        path = request.path
        if path.startswith(HOOK_PREFIX):
            if request.method != "POST":
                raise HttpError(405, "use POST")
            return await self._hook(request, path[len(HOOK_PREFIX):], reader, writer)
        if path in ("/v1/status", "/v1/sessions"):
            if request.method not in ("GET", "HEAD"):
                raise HttpError(405, "use GET")
            if "content-length" in request.headers or "transfer-encoding" in request.headers:
                raise HttpError(400, "GET takes no body")
            self._counts[path.rsplit("/", 1)[1]] += 1
            await self._respond(writer, 200, self._view(path), close=not request.keep_alive,
                                head=request.method == "HEAD")
            return request.keep_alive
        posted = next((r for r in self._body_routes if r.owns(path)), None)
        if posted is not None:
            return await self._post(posted, request, reader, writer)
        route = self._extra(path)
        if route is not None:
            return await self._answer(route, request, writer)
        routes = f"POST {HOOK_PREFIX}<agent>, GET /v1/status, GET /v1/sessions"
        raise HttpError(404, f"no route {path!r}: {routes}")

    async def _answer(self, route: Route, request: Request, writer: asyncio.StreamWriter) -> bool:
        length = request.headers.get("content-length", "0").strip()
        if length != "0" or "transfer-encoding" in request.headers:
            raise HttpError(400, "these routes take no body")
        response = await asyncio.to_thread(route.handle, request)
        self._counts[f"{request.path.split('/')[1] or 'root'}_{response.status}"] += 1
        await self._send(writer, response.status, response.body, close=not request.keep_alive,
                         head=request.method == "HEAD", content_type=response.content_type,
                         extra=response.headers)
        return request.keep_alive

    async def _post(self, route: BodyRoute, request: Request, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> bool:
        if request.method != "POST":
            raise HttpError(405, "use POST")
        received = time.time()
        body = await read_body(reader, request.headers, route.max_body_bytes, self.config.body_timeout_s)
        try:
            async with asyncio.timeout(self.config.body_timeout_s):  # a stalled disk is not forever
                response = await route.post(request, body, received)
        except HttpError:
            raise
        except Exception as exc:
            log.warning("%s refused: %s", request.path, exc)
            self._counts["rejected_queue"] += 1
            await self._respond(writer, 503, {"error": "the collector could not queue the request"},
                                close=not request.keep_alive)
            return request.keep_alive
        self._counts[f"{request.path.strip('/').replace('/', '_')}_{response.status}"] += 1
        if response.status == 200:
            self._bytes += len(body)
        await self._send(writer, response.status, response.body, close=not request.keep_alive,
                         content_type=response.content_type, extra=response.headers)
        return request.keep_alive

    def _view(self, path: str) -> dict[str, Any]:
        snapshot = self._snapshot()
        if path == "/v1/sessions":
            return {"sessions": snapshot.get("sessions", []), "budget": snapshot.get("budget", {}),
                    "generated_unix": time.time()}
        return {**snapshot, "ingest": self.stats()}

    async def _hook(self, request: Request, agent: str, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> bool:
        received = time.time()
        length = body_length(request.headers, self.config.max_body_bytes)  # before reading any body
        if agent not in self._known_agents():
            known = ", ".join(sorted(self._known_agents())) or "none"
            raise HttpError(404, f"unknown agent {agent!r} (known: {known})")
        try:
            async with asyncio.timeout(self.config.body_timeout_s):
                body = await reader.readexactly(length)
        except TimeoutError:
            raise HttpError(408, "request body too slow") from None
        body = with_event_name(body, request.query.get("event", [None])[0])
        try:
            result = self._submit(agent, body, received)
            if inspect.isawaitable(result):
                async with asyncio.timeout(self.config.body_timeout_s):  # a stalled disk is not forever
                    await result
        except HttpError:
            raise  # the submitter's own answer (400: cannot be stored, 500: the write failed)
        except Exception as exc:
            log.warning("ingest queue refused a %s hook: %s", agent, exc)
            self._counts["rejected_queue"] += 1
            await self._respond(writer, 503, {"error": "the collector could not queue the event"},
                                close=not request.keep_alive)
            return request.keep_alive
        self._counts["accepted"] += 1
        self._bytes += len(body)
        await self._respond(writer, 200, None, close=not request.keep_alive)
        return request.keep_alive

    async def _respond(self, writer: asyncio.StreamWriter, status: int, body: dict[str, Any] | None,
                       close: bool, head: bool = False) -> None:
        payload = b"{}" if body is None else orjson.dumps(body)
        await self._send(writer, status, payload, close, head)

    async def _send(self, writer: asyncio.StreamWriter, status: int, payload: bytes, close: bool,
                    head: bool = False, content_type: str = "application/json",
                    extra: Sequence[tuple[str, str]] = ()) -> None:
        lines = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(payload)}",
            "Cache-Control: no-store",
            "X-Content-Type-Options: nosniff",
            *(f"{name}: {value}" for name, value in extra),
        ]
        if close:
            lines.append("Connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + (b"" if head else payload))
        with contextlib.suppress(ConnectionError):
            await writer.drain()
