"""Read the JSON lines just before a line of an append-only log, nearest first.

Some facts of an agent's log sit in one record while the id that names them sits in a later one (Qwen
Code's chat ``user`` record has no prompt id; the telemetry records after it carry it). A parser that
meets the later record looks back through the file for the earlier one. The file is append-only, so
what lies before a position never changes: the answer is the same on every read (deterministic ids).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import orjson

from collector.model.decode import loads

CHUNK = 64 * 1024
FIRST_CHUNK = 4 * 1024  # the line wanted is most often one or two lines back: the reads grow up to CHUNK
MAX_BYTES = 4 * 1024 * 1024  # never look further back than this


def lines_before(path: str, end: int, limit: int = MAX_BYTES) -> Iterator[dict[str, Any]]:
    """The JSON objects on the lines that end before byte offset ``end`` of ``path``, nearest first.
    Lines that are not JSON objects are skipped; a missing file gives nothing."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        yield from _scan(fd, end, max(0, end - limit))
    finally:
        os.close(fd)


def _scan(fd: int, end: int, floor: int) -> Iterator[dict[str, Any]]:
    tail = b""
    pos = end
    chunk = FIRST_CHUNK
    while pos > floor:
        start = max(floor, pos - chunk)
        chunk = min(CHUNK, chunk * 4)
        block = os.pread(fd, pos - start, start) + tail
        pos = start
        lines = block.split(b"\n")
        tail = lines.pop(0) if pos > floor else b""  # maybe cut: completed by the next block
        for line in reversed(lines):
            data = _decode(line)
            if data is not None:
                yield data


def _decode(line: bytes) -> dict[str, Any] | None:
    if not line.strip():
        return None
    try:
        data = loads(line)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None
