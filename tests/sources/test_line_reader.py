"""The line reader cuts whole chunks into lines at once; it must yield exactly what the former reader, which
searched for each newline in turn, yielded: the same lines, the same start offsets, the same cursor after
each line (offset and the skipping state of an oversized line), for lines that cross chunks, lines longer
than the limit (complete in one chunk or not), a partial last line and a read cut by its budget."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.sources import line_reader
from collector.sources.line_reader import LineCursor, iter_lines


def former_iter_lines(fd: int, cursor: LineCursor, max_line: int, budget: int,
                      chunk_size: int) -> Iterator[tuple[bytes | None, int]]:
    """The reader as it was before (a ``find`` per newline), the oracle."""
    read_at = cursor.offset
    pending = bytearray()
    consumed = 0
    while consumed < budget or pending:
        chunk = os.pread(fd, chunk_size, read_at)
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
            cursor.offset = read_at
            continue
        pending += rest
        if len(pending) > max_line:
            pending.clear()
            cursor.skipping = True
            cursor.offset = read_at
            yield None, cursor.offset


def _content(rng: random.Random) -> bytes:
    lines = []
    for _ in range(rng.randrange(1, 40)):
        size = rng.choice([0, 1, 5, 17, 31, 33, 64, 90, 200])
        lines.append(bytes(rng.choice(b"ab{}\":, ") for _ in range(size)))
    text = b"\n".join(lines)
    return text if rng.random() < 0.5 else text + b"\n"  # a partial last line, or none


def _run(reader: Iterator[tuple[bytes | None, int]], cursor: LineCursor) -> list[tuple[bytes | None, int, int, bool]]:
    return [(line, start, cursor.offset, cursor.skipping) for line, start in reader]


@pytest.mark.parametrize("seed", range(60))
def test_the_same_lines_offsets_and_cursor_as_the_former_reader(seed: int, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    chunk, max_line, budget = rng.choice([7, 16, 32, 100]), rng.choice([8, 32, 1000]), rng.choice([10, 50, 1 << 30])
    monkeypatch.setattr(line_reader, "CHUNK", chunk)
    path = tmp_path / "x.jsonl"
    path.write_bytes(_content(rng))
    fd = os.open(path, os.O_RDONLY)
    try:
        new, old = LineCursor(0), LineCursor(0)
        for _ in range(50):  # read after read, as a tailer does, until nothing moves
            got = _run(iter_lines(fd, new, max_line, budget), new)
            want = _run(former_iter_lines(fd, old, max_line, budget, chunk), old)
            assert got == want
            assert (new.offset, new.skipping) == (old.offset, old.skipping)
            if not got and new.offset == os.fstat(fd).st_size:
                break
    finally:
        os.close(fd)


def test_a_long_line_is_skipped_not_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(line_reader, "CHUNK", 16)
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a":1}\n' + b"x" * 100 + b'\n{"b":2}\n')
    fd = os.open(path, os.O_RDONLY)
    try:
        cursor = LineCursor(0)
        lines = [line for line, _ in iter_lines(fd, cursor, 32, 1 << 30)]
    finally:
        os.close(fd)
    assert lines == [b'{"a":1}', None, b'{"b":2}']
    assert (cursor.offset, cursor.skipping) == (path.stat().st_size, False)
