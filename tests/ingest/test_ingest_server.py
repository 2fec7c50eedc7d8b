"""The loopback ingest server over real sockets: routes, keep-alive, and every refusal."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from collector.ingest import IngestConfig, IngestServer, to_envelope

AGENTS = {"claude-code", "codex"}
TOKEN = "3f" * 32


def with_token(raw: bytes, token: str | None = TOKEN) -> bytes:
    """The request with the secret header added after the request line (None: as it is)."""
    if token is None:
        return raw
    line, sep, rest = raw.partition(b"\r\n")
    return line + sep + f"X-Agent-Collector-Token: {token}\r\n".encode() + rest if sep else raw


class Sink:
    def __init__(self) -> None:
        self.items: list[tuple[str, bytes, float]] = []
        self.fail = False

    async def __call__(self, agent: str, body: bytes, received: float) -> None:
        if self.fail:
            raise RuntimeError("queue full")
        self.items.append((agent, body, received))


@pytest.fixture
def sink() -> Sink:
    return Sink()


@pytest.fixture
async def server(sink: Sink) -> AsyncIterator[IngestServer]:
    snapshot = {"sessions": [{"agent": "claude-code", "session_id": "s1", "status": "running"}],
                "sources": []}
    srv = IngestServer(sink, lambda: AGENTS, lambda: snapshot,
                       IngestConfig(token=TOKEN, port=0, max_body_bytes=4096, header_timeout_s=2))
    async with srv:
        yield srv


async def exchange(port: int, raw: bytes, token: str | None = TOKEN) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(with_token(raw, token))
    await writer.drain()
    try:
        return await read_response(reader)
    finally:
        writer.close()


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 3)
    lines = head.decode().split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, body


def post(port: int, body: bytes, path: str = "/v1/hooks/claude-code", extra: str = "",
         host: str | None = None) -> bytes:
    host = host or f"127.0.0.1:{port}"
    return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body


PAYLOAD = orjson.dumps({"session_id": "s1", "hook_event_name": "Stop", "stop_hook_active": False})


async def test_hook_post_answers_empty_object_and_queues(server: IngestServer, sink: Sink) -> None:
    status, headers, body = await exchange(server.port, post(server.port, PAYLOAD))
    assert (status, body) == (200, b"{}")
    assert headers["content-type"] == "application/json"
    assert not any(h.startswith("access-control") for h in headers)  # no CORS, ever
    ((agent, raw, received),) = sink.items
    assert agent == "claude-code" and raw == PAYLOAD and received > 0
    assert to_envelope(agent, raw, received) == {
        "ts": received, "agent": "claude-code", "event": "Stop", "payload": orjson.loads(PAYLOAD)}


async def test_event_query_names_an_unnamed_payload(server: IngestServer, sink: Sink) -> None:
    raw = orjson.dumps({"session_id": "s1"})
    status, _, _ = await exchange(server.port, post(server.port, raw, "/v1/hooks/codex?event=notify"))
    assert status == 200
    assert to_envelope(*sink.items[0])["event"] == "notify"


async def test_keep_alive_serves_many_requests_on_one_connection(server: IngestServer, sink: Sink) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    for _ in range(3):
        writer.write(with_token(post(server.port, PAYLOAD)))
        await writer.drain()
        status, headers, _ = await read_response(reader)
        assert status == 200 and "connection" not in headers
    writer.write(with_token(f"GET /v1/sessions HTTP/1.1\r\nHost: localhost:{server.port}\r\n\r\n".encode()))
    status, _, body = await read_response(reader)
    assert status == 200 and orjson.loads(body)["sessions"][0]["status"] == "running"
    writer.close()
    assert len(sink.items) == 3


async def test_status_and_sessions_views(server: IngestServer) -> None:
    get = f"GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nConnection: close\r\n\r\n"
    status, headers, body = await exchange(server.port, get.encode())
    view = orjson.loads(body)
    assert status == 200 and headers["connection"] == "close"
    assert view["sources"] == [] and view["ingest"]["url"] == server.url
    get = f"GET /v1/sessions HTTP/1.1\r\nHost: [::1]:{server.port}\r\n\r\n"
    status, _, body = await exchange(server.port, get.encode())
    assert status == 200 and orjson.loads(body)["sessions"][0]["session_id"] == "s1"


@pytest.mark.parametrize("token", [None, "", "wrong", TOKEN[:-1], TOKEN + "0", "4a" * 32])
@pytest.mark.parametrize("path", ["/v1/hooks/claude-code", "/v1/status", "/v1/sessions"])
async def test_every_route_needs_the_secret(server: IngestServer, sink: Sink, token: str | None, path: str) -> None:
    """No header, an empty one, a near miss or another user's secret: 401, counted, nothing queued or shown."""
    raw = post(server.port, PAYLOAD, path) if path.startswith("/v1/hooks/") else \
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode()
    status, headers, body = await exchange(server.port, raw, token)
    assert status == 401 and headers["connection"] == "close"
    assert b"X-Agent-Collector-Token" in body and b"s1" not in body and b"running" not in body
    assert sink.items == []
    assert server.stats()["requests"]["rejected_401"] == 1
    assert (await exchange(server.port, raw))[0] == 200, "the right secret still works"


def test_the_server_will_not_run_without_a_secret() -> None:
    with pytest.raises(ValueError, match="secret"):
        IngestServer(Sink(), set, dict, IngestConfig(port=0))


async def test_unknown_agent_is_404_with_a_clear_message(server: IngestServer, sink: Sink) -> None:
    status, _, body = await exchange(server.port, post(server.port, PAYLOAD, "/v1/hooks/nobody"))
    assert status == 404
    message = orjson.loads(body)["error"]
    assert "unknown agent 'nobody'" in message and "claude-code" in message
    assert sink.items == []


@pytest.mark.parametrize("header", [
    "Origin: http://evil.example", "Origin: null", "Referer: http://evil.example/page",
    "Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: no-cors",
])
async def test_browser_requests_are_refused(server: IngestServer, sink: Sink, header: str) -> None:
    status, headers, body = await exchange(server.port, post(server.port, PAYLOAD, extra=header + "\r\n"))
    assert status == 403 and b"browser" in body
    assert not any(h.startswith("access-control") for h in headers)
    assert sink.items == []


async def test_browser_headers_refused_on_reads_too(server: IngestServer) -> None:
    get = (f"GET /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
           "Origin: http://evil.example\r\n\r\n")
    status, _, body = await exchange(server.port, get.encode())
    assert status == 403 and b"sessions" not in body


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1:1", "10.0.0.1:{port}",
                                  "localhost.evil.example:{port}", "[::1", ""])
async def test_non_loopback_host_is_refused(server: IngestServer, sink: Sink, host: str) -> None:
    raw = post(server.port, PAYLOAD, host=host.format(port=server.port) or " ")
    status, _, _ = await exchange(server.port, raw)
    assert status in (400, 403)
    assert sink.items == []


async def test_missing_host_is_refused(server: IngestServer) -> None:
    raw = f"POST /v1/hooks/claude-code HTTP/1.1\r\nContent-Length: {len(PAYLOAD)}\r\n\r\n".encode() + PAYLOAD
    status, _, _ = await exchange(server.port, raw)
    assert status == 403


async def test_body_over_cap_is_refused_without_reading_it(server: IngestServer, sink: Sink) -> None:
    # The client announces 50 MB and sends none of it: the answer must come from the headers alone.
    head = (f"POST /v1/hooks/claude-code HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            f"Content-Length: {50 * 1024 * 1024}\r\n\r\n").encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(with_token(head) + b"{" * 1000)
    await writer.drain()
    status, headers, body = await read_response(reader)
    assert status == 413 and headers["connection"] == "close" and b"cap" in body
    assert await asyncio.wait_for(reader.read(), 2) == b""  # the server hung up
    writer.close()
    assert sink.items == [] and server.stats()["bytes_accepted"] == 0


@pytest.mark.parametrize(("extra", "expected"), [
    ("Transfer-Encoding: chunked\r\n", 411),
    ("", 411),
    ("Content-Length: x1\r\n", 400),
])
async def test_length_is_required(server: IngestServer, extra: str, expected: int) -> None:
    raw = f"POST /v1/hooks/claude-code HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n{extra}\r\n".encode()
    status, _, _ = await exchange(server.port, raw + b"5\r\nhello\r\n0\r\n\r\n")
    assert status == expected


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b"\xff\xfe"])
async def test_body_must_be_a_json_object(server: IngestServer, sink: Sink, body: bytes) -> None:
    status, _, _ = await exchange(server.port, post(server.port, body))
    assert status == 400 and sink.items == []


@pytest.mark.parametrize("body", [b'{"session_id": "s1", "prompt": "cut \\ud83d half"}',
                                  b'{"session_id": "s1", "\\udc00": "lone low"}'])
async def test_lone_surrogate_is_accepted_as_replacement_character(server: IngestServer, sink: Sink,
                                                                    body: bytes) -> None:
    """A lone UTF-16 surrogate escape (Node's emoji cut in half) is taken as U+FFFD, as the spool takes
    it, not refused with 400; the stored body is valid UTF-8 JSON."""
    status, _, answer = await exchange(server.port, post(server.port, body, "/v1/hooks/codex?event=notify"))
    assert (status, answer) == (200, b"{}")
    ((_, raw, _),) = sink.items
    stored = orjson.loads(raw)  # strict: would raise on a surrogate
    assert "\ufffd" in orjson.dumps(stored).decode() and stored["hook_event_name"] == "notify"
    assert stored["session_id"] == "s1"
    status, _, _ = await exchange(server.port, post(server.port, body))  # no ?event=: re-encoded too
    assert status == 200 and "\ufffd" in sink.items[1][1].decode("utf-8")


async def test_malformed_requests(server: IngestServer) -> None:
    for raw in (b"GARBAGE\r\n\r\n", b"GET /v1/status HTTP/2\r\nHost: 127.0.0.1\r\n\r\n",
                b"GET http://x/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"):
        status, _, _ = await exchange(server.port, raw)
        assert status in (400, 505)
    raw = f"GET /nope HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode()
    assert (await exchange(server.port, raw))[0] == 404
    raw = f"GET /v1/hooks/claude-code HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode()
    assert (await exchange(server.port, raw))[0] == 405


async def test_huge_headers_are_refused(server: IngestServer) -> None:
    pad = "a" * 40000
    raw = f"GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nX-Pad: {pad}\r\n\r\n".encode()
    assert (await exchange(server.port, raw))[0] == 431


async def test_queue_failure_is_503(server: IngestServer, sink: Sink) -> None:
    sink.fail = True
    status, _, _ = await exchange(server.port, post(server.port, PAYLOAD))
    assert status == 503
    assert server.stats()["requests"]["rejected_queue"] == 1


async def test_plain_function_submit_works() -> None:
    got: list[str] = []
    srv = IngestServer(lambda agent, body, ts: got.append(agent), lambda: {"codex"}, dict,
                       IngestConfig(token=TOKEN, port=0))
    async with srv:
        status, _, _ = await exchange(srv.port, post(srv.port, PAYLOAD, "/v1/hooks/codex"))
    assert status == 200 and got == ["codex"]


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "example.com", ""])
def test_refuses_to_start_on_a_non_loopback_address(host: str) -> None:
    with pytest.raises(ValueError, match="loopback"):
        IngestServer(Sink(), set, dict, IngestConfig(token=TOKEN, host=host, port=0))


def _listening_addresses(port: int) -> list[str]:
    """Local addresses of listening TCP sockets on ``port``, from /proc/net/tcp{,6}."""
    found = []
    for name, width in (("tcp", 4), ("tcp6", 16)):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] != "0A" or int(hex_port, 16) != port:  # 0A = LISTEN
                continue
            raw = bytes.fromhex(address)
            # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, width, 4))
            found.append(str(ipaddress.ip_address(raw)))
    return found


async def test_listens_on_loopback_only(server: IngestServer) -> None:
    assert server.bound_addresses == ["127.0.0.1"]
    if not sys.platform.startswith("linux"):
        return
    # the kernel's own list of listening sockets: this port is held on 127.0.0.1 only, not on 0.0.0.0/::
    assert _listening_addresses(server.port) == ["127.0.0.1"]
    # so another address of this machine (here another loopback one) is free on the same port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.2", server.port))


def test_envelope_of_a_non_object_has_no_event() -> None:
    env: dict[str, Any] = to_envelope("codex", b"[]", 1.0)
    assert env["event"] is None and env["payload"] == []
