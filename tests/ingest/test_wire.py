"""Request bodies on the wire: Content-Length or chunked (Node's OTLP exporters send chunked bodies with
no length), each capped, malformed framing refused."""

from __future__ import annotations

import asyncio

import pytest

from collector.ingest.wire import HttpError, read_body


def _read(data: bytes, headers: dict[str, str], cap: int = 64, eof: bool = True) -> bytes:
    async def run() -> bytes:
        reader = asyncio.StreamReader(limit=1024)
        reader.feed_data(data)
        if eof:
            reader.feed_eof()
        return await read_body(reader, headers, cap, timeout=0.5)
    return asyncio.run(run())


def _status(data: bytes, headers: dict[str, str], cap: int = 64, eof: bool = True) -> int:
    with pytest.raises(HttpError) as refused:
        _read(data, headers, cap, eof)
    return refused.value.status


CHUNKED = {"transfer-encoding": "chunked"}


def test_a_chunked_body_is_joined_and_its_trailers_read() -> None:
    assert _read(b"5\r\nhello\r\n1;ext=1\r\n \r\n6\r\nworld!\r\n0\r\nX-Trailer: y\r\n\r\n", CHUNKED) == b"hello world!"


def test_a_length_body_is_read_exactly() -> None:
    assert _read(b"abcdef", {"content-length": "4"}) == b"abcd"


@pytest.mark.parametrize(("data", "headers", "status"), [
    (b"41\r\n" + b"x" * 65 + b"\r\n0\r\n\r\n", CHUNKED, 413),  # one chunk over the cap
    (b"20\r\n" + b"x" * 32 + b"\r\n21\r\n" + b"x" * 33 + b"\r\n0\r\n\r\n", CHUNKED, 413),  # the sum over it
    (b"zz\r\nhello\r\n0\r\n\r\n", CHUNKED, 400),  # not hex
    (b"5\r\nhelloXX0\r\n\r\n", CHUNKED, 400),  # no CRLF after the data
    (b"-5\r\nhello\r\n", CHUNKED, 400),
    (b"1" * 2000 + b"\r\n", CHUNKED, 400),  # a chunk-size line past the stream's limit
    (b"", {"transfer-encoding": "gzip, chunked"}, 411),
    (b"", {"transfer-encoding": "chunked", "content-length": "5"}, 400),
    (b"", {}, 411),
    (b"", {"content-length": "65"}, 413),
])
def test_bad_framing_is_refused(data: bytes, headers: dict[str, str], status: int) -> None:
    assert _status(data, headers) == status


def test_a_body_that_never_ends_times_out() -> None:
    assert _status(b"5\r\nhel", CHUNKED, eof=False) == 408
