"""A JSONL source yields a position after every line, and makes the value of one (with the digest of the
line's end, which tells a file rewritten in place from one that only grew) when it is first read. Every
value must be what the position is: the file's identity, the offset just past the line, and the digest
and length of the bytes just before that offset; a file a hook named carries ``extra``."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path
from typing import Any

from collector.sources.base import Item
from collector.sources.file_identity import identify
from collector.sources.jsonl_files import TAIL_BYTES, JsonlFiles
from collector.util.regular import open_regular


def _items(source: JsonlFiles) -> list[Item]:
    async def run() -> list[Item]:
        return [item async for item in source.read()]
    return asyncio.run(run())


def _expected(path: Path, offset: int, line_len: int, extra: bool) -> list[tuple[str, Any]]:
    content = path.read_bytes()
    fd = open_regular(str(path))
    try:
        ident = identify(fd)
    finally:
        os.close(fd)
    assert ident is not None
    size = min(line_len + 1, TAIL_BYTES)
    value: list[tuple[str, Any]] = [("dev", ident.dev), ("ino", ident.ino), ("fp", ident.fingerprint),
                                    ("offset", offset), ("skipping", False),
                                    ("tail", hashlib.sha256(content[offset - size:offset]).hexdigest()[:16]),
                                    ("tail_len", size)]
    return value + [("extra", True)] if extra else value


def test_every_position_is_exact_whichever_is_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = [b'{"n": %d, "text": "%s"}' % (n, b"x" * (n * 37 % 400)) for n in range(30)]
    lines[7] = b"not json"
    lines[9] = b""
    path.write_bytes(b"\n".join(lines) + b"\n")
    items = _items(JsonlFiles("a:t", "a", "transcript", [str(tmp_path / "*.jsonl")], {}))
    assert len(items) == len(lines)
    offset = 0
    for (record, position), line in zip(items, lines, strict=True):
        offset += len(line) + 1
        assert position.stream == f"a:t:{path}"
        assert list(position.value.items()) == _expected(path, offset, len(line), extra=False)
        assert position.value is position.value  # made once
        assert (record is None) == (line in (b"not json", b""))


def test_a_hook_named_file_says_extra(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n')
    source = JsonlFiles("a:t", "a", "transcript", [str(tmp_path / "*.jsonl")], {})
    assert source.add_path(str(path))
    items = _items(source)
    assert [list(p.value.items()) for _, p in items] == [_expected(path, 9, 8, True), _expected(path, 18, 8, True)]
