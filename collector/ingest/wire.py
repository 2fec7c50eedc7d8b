"""The HTTP/1.1 wire of the ingest server: the request head, the body's length, chunked bodies (the
OTLP exporters of Node agents send ``Transfer-Encoding: chunked`` and no ``Content-Length``), and the
errors answered with a status."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qs

import orjson

from collector.model import decode

MAX_CHUNK_LINE = 1024  # a chunk-size line (hex size and extensions) longer than this is refused
MAX_TRAILERS = 32


class HttpError(Exception):
    """Answered with ``status`` and ``{"error": message}``; the connection is then closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    version: str
    headers: dict[str, str]

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return connection == "keep-alive"
        return connection != "close"


@dataclass(frozen=True, slots=True)
class Response:
    """What an extra route answers."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: Sequence[tuple[str, str]] = field(default_factory=tuple)


def parse_head(head: bytes) -> Request:
    """Parse the request line and headers (``head`` ends with the blank line)."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise HttpError(400, "undecodable request head") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise HttpError(400, "malformed request line")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise HttpError(505, "only HTTP/1.1 and HTTP/1.0")
    if not method.isalpha() or not method.isupper():
        raise HttpError(400, "malformed method")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or any(c in name for c in " \t"):
            raise HttpError(400, "malformed header line")
        key = name.lower()
        if key in headers and key in ("host", "content-length", "transfer-encoding"):
            raise HttpError(400, f"duplicate {name} header")
        headers[key] = value.strip()
    if not target.startswith("/") or target.startswith("//"):
        raise HttpError(400, "request target must be a path")
    path, _, query = target.partition("?")
    return Request(method, path, parse_qs(query) if query else {}, version, headers)


def split_host(host: str) -> tuple[str, str] | None:
    """``name`` and ``port`` ("" when absent) of a Host header, or None when it is malformed."""
    if host.startswith("["):
        name, sep, rest = host[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        return name, rest[1:]
    name, _, port = host.partition(":")
    if ":" in port or not name:
        return None
    return name, port


def body_length(headers: dict[str, str], cap: int) -> int:
    """The body length to read, or an HttpError (411 without a length, 413 over the cap)."""
    if "transfer-encoding" in headers:
        raise HttpError(411, "send Content-Length; Transfer-Encoding is not accepted")
    raw = headers.get("content-length")
    if raw is None:
        raise HttpError(411, "Content-Length is required")
    if not raw.isdigit():
        raise HttpError(400, "bad Content-Length")
    length = int(raw)
    if length > cap:
        raise HttpError(413, f"body of {length} bytes is over the {cap}-byte cap")
    return length


def with_event_name(body: bytes, event: str | None) -> bytes:
    """Check that the body is a JSON object; with ``?event=``, name the event if the payload does not.
    A body only the lenient decoder takes (lone UTF-16 surrogates, a BOM) is re-encoded from its decoded
    form, lone surrogates as U+FFFD, as the spool and the files have them."""
    strict = True
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        try:
            payload = decode.loads(body)
        except orjson.JSONDecodeError:
            raise HttpError(400, "body is not JSON") from None
        strict = False
    if not isinstance(payload, dict):
        raise HttpError(400, "body must be a JSON object")
    if event and not payload.get("hook_event_name"):
        payload["hook_event_name"] = event
        return orjson.dumps(payload)
    return body if strict else orjson.dumps(payload)


async def read_body(reader: asyncio.StreamReader, headers: dict[str, str], cap: int, timeout: float) -> bytes:
    """The body of a request that may be chunked: ``Content-Length`` (413 over ``cap`` before a byte is
    read) or ``Transfer-Encoding: chunked`` (413 once the chunks pass ``cap``; 400 when malformed); both
    at once is refused (400), another transfer coding too (411). 408 when it takes longer than ``timeout``."""
    coding = headers.get("transfer-encoding")
    try:
        async with asyncio.timeout(timeout):
            if coding is None:
                return await reader.readexactly(body_length(headers, cap))
            if coding.strip().lower() != "chunked":
                raise HttpError(411, "only Transfer-Encoding: chunked is accepted")
            if "content-length" in headers:
                raise HttpError(400, "Content-Length and Transfer-Encoding together")
            return await _chunks(reader, cap)
    except TimeoutError:
        raise HttpError(408, "request body too slow") from None


async def _chunks(reader: asyncio.StreamReader, cap: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        size = _chunk_size(await _line(reader))
        if size == 0:
            break
        total += size
        if total > cap:
            raise HttpError(413, f"chunked body over the {cap}-byte cap")
        parts.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise HttpError(400, "malformed chunk")
    for _ in range(MAX_TRAILERS):
        if await _line(reader) == b"\r\n":
            return b"".join(parts)
    raise HttpError(400, "too many trailer fields")


async def _line(reader: asyncio.StreamReader) -> bytes:
    try:
        line = await reader.readuntil(b"\r\n")
    except asyncio.LimitOverrunError:
        raise HttpError(400, "chunk line too long") from None
    if len(line) > MAX_CHUNK_LINE:
        raise HttpError(400, "chunk line too long")
    return line


def _chunk_size(line: bytes) -> int:
    text = line[:-2].split(b";", 1)[0].strip()
    if not text or len(text) > 15 or any(c not in b"0123456789abcdefABCDEF" for c in text):
        raise HttpError(400, "malformed chunk size")
    return int(text, 16)
