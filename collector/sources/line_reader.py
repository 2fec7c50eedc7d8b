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
    Each chunk is cut into lines at once (``bytes.split``): a search per line in Python cost more.
    """
    read_at = cursor.offset
    pending = bytearray()  # the start of a line that goes on in the next chunk
    consumed = 0
    while consumed < budget or pending:  # never stop in the middle of a line
        chunk = os.pread(fd, CHUNK, read_at)
        if not chunk:
            return
        read_at += len(chunk)
        consumed += len(chunk)
        if cursor.skipping:  # the rest of an oversized line: discarded up to its newline
            newline = chunk.find(b"\n")
            if newline < 0:
                cursor.offset = read_at
                continue
            cursor.skipping = False
            cursor.offset = read_at - len(chunk) + newline + 1
            chunk = chunk[newline + 1:]
        lines = chunk.split(b"\n")
        rest = lines.pop()  # after the last newline: the start of a line not complete yet
        if lines:
            if pending:
                lines[0] = bytes(pending + lines[0])
                pending.clear()
            offset = cursor.offset
            for line in lines:
                start = offset
                offset += len(line) + 1
                cursor.offset = offset
                yield (line if len(line) <= max_line else None), start
        pending += rest
        if len(pending) > max_line:
            pending.clear()
            cursor.skipping = True
            cursor.offset = read_at
            yield None, cursor.offset
