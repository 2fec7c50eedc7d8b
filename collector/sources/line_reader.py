"""Read complete lines from an open file, from a byte offset, never passing a partial last line.

A line longer than ``max_line`` is skipped (reported as ``None``) without ever being held in memory:
the reader switches to "skipping" until the next newline, and that state survives in the position.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

CHUNK = 1 << 20


@dataclass(slots=True)
class LineCursor:
    offset: int
    skipping: bool = False


def iter_lines(fd: int, cursor: LineCursor, max_line: int, budget: int) -> Iterator[tuple[bytes | None, int]]:
    """Yield ``(line_without_newline | None, start_offset)``; ``cursor`` moves past each line.

    Stops at end of data or after ``budget`` bytes; an incomplete last line is left for next time.
    """
    read_at = cursor.offset
    pending = bytearray()
    consumed = 0
    while consumed < budget or pending:  # never stop in the middle of a line
        chunk = os.pread(fd, CHUNK, read_at)
        if not chunk:
            return
        read_at += len(chunk)
        consumed += len(chunk)
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            if newline < 0:
                break
            line_start = cursor.offset
            if cursor.skipping:
                cursor.skipping = False
                cursor.offset = read_at - len(chunk) + newline + 1
                pending.clear()
                start = newline + 1
                continue
            piece = chunk[start:newline]
            line = bytes(pending + piece) if pending else piece
            pending.clear()
            cursor.offset = read_at - len(chunk) + newline + 1
            start = newline + 1
            yield (line if len(line) <= max_line else None), line_start
        rest = chunk[start:]
        if cursor.skipping:
            cursor.offset = read_at  # discard the rest of an oversized line as we go
            continue
        pending += rest
        if len(pending) > max_line:
            pending.clear()
            cursor.skipping = True
            cursor.offset = read_at
            yield None, cursor.offset
