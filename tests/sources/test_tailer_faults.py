"""The JSONL tailer under the faults real files go through: restarts, partial lines, truncation,
rotation, day rollover, malformed / non-UTF-8 / oversized lines."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from collector.sources.jsonl_files import JsonlFiles


class Harness:
    """A tailer plus a checkpoint dict that only moves when we say the batch was delivered."""

    def __init__(self, pattern: str, max_line: int = 16 * 1024 * 1024) -> None:
        self.pattern = pattern
        self.max_line = max_line
        self.committed: dict[str, dict[str, Any]] = {}
        self.source = self._new()

    def _new(self) -> JsonlFiles:
        return JsonlFiles("t:hooks", "t", "hook", [self.pattern], dict(self.committed), self.max_line)

    def restart(self) -> None:
        self.source = self._new()

    def read(self, commit: bool = True) -> list[dict[str, Any]]:
        async def run() -> list[Any]:
            return [item async for item in self.source.read()]

        items = asyncio.run(run())
        if commit:
            for _, position in items:
                self.committed[position.stream] = position.value
        return [record.data for record, _ in items if record is not None]


def line(n: int, **extra: Any) -> bytes:
    return json.dumps({"n": n, **extra}).encode() + b"\n"


def test_restart_mid_file_reads_each_line_once(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    f.write_bytes(b"".join(line(i) for i in range(5)))
    h = Harness(str(tmp_path / "*.jsonl"))
    assert [d["n"] for d in h.read()] == [0, 1, 2, 3, 4]
    with f.open("ab") as out:
        out.write(b"".join(line(i) for i in range(5, 8)))
    h.restart()
    assert [d["n"] for d in h.read()] == [5, 6, 7]
    h.restart()
    assert h.read() == []


def test_uncommitted_batch_is_read_again_after_crash(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(line(1) + line(2))
    h = Harness(str(tmp_path / "*.jsonl"))
    assert len(h.read(commit=False)) == 2
    h.restart()  # crash before commit: the same lines come back
    assert [d["n"] for d in h.read()] == [1, 2]


def test_partial_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    f.write_bytes(line(1) + b'{"n": 2, "half"')
    h = Harness(str(tmp_path / "*.jsonl"))
    assert [d["n"] for d in h.read()] == [1]
    h.restart()
    assert h.read() == []
    with f.open("ab") as out:
        out.write(b': "done"}\n')
    assert h.read() == [{"n": 2, "half": "done"}]


def test_truncation_starts_over(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    f.write_bytes(line(1) + line(2) + line(3))
    h = Harness(str(tmp_path / "*.jsonl"))
    assert len(h.read()) == 3
    with f.open("r+b") as out:
        out.truncate(0)
    f.write_bytes(line(1))  # same first line, shorter file: truncated then rewritten
    assert [d["n"] for d in h.read()] == [1]
    assert h.source.stats.truncations == 1


def test_rewrite_with_other_content_is_detected_by_fingerprint(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    f.write_bytes(line(1) + line(2))
    h = Harness(str(tmp_path / "*.jsonl"))
    h.read()
    with f.open("r+b") as out:  # same inode, new content, longer than before
        out.seek(0)
        out.write(line(7, pad="x" * 40) + line(8) + line(9))
    assert [d["n"] for d in h.read()] == [7, 8, 9]


def test_rotation_reads_old_tail_then_new_file(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    f.write_bytes(line(1) + line(2))
    h = Harness(str(tmp_path / "*.jsonl"))
    h.read()
    with f.open("ab") as out:
        out.write(line(3))  # written before rotation, not read yet
    os.rename(f, tmp_path / "a.jsonl.1")
    f.write_bytes(line(4) + line(5))
    assert [d["n"] for d in h.read()] == [3, 4, 5]
    assert h.source.stats.rotations == 1
    h.restart()
    assert h.read() == []


def test_day_rollover_finishes_yesterday(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    day1 = spool / "a-2026-11-29.jsonl"
    day1.write_bytes(line(1))
    h = Harness(str(spool / "*.jsonl"))
    h.read()
    with day1.open("ab") as out:  # a hook still running at midnight
        out.write(line(2))
    (spool / "a-2026-11-30.jsonl").write_bytes(line(3))
    assert sorted(d["n"] for d in h.read()) == [2, 3]


def test_bad_lines_are_skipped_and_counted_neighbours_kept(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    big = b'{"n": "big", "x": "' + b"y" * (17 * 1024 * 1024) + b'"}\n'
    f.write_bytes(
        line(1) + b"{not json\n" + line(2) + b'{"n": "\xff\xfe"}\n' + line(3) + big + line(4) + b"[1,2]\n" + line(5)
    )
    h = Harness(str(tmp_path / "*.jsonl"))
    assert [d["n"] for d in h.read()] == [1, 2, 3, 4, 5]
    stats = h.source.stats
    assert (stats.malformed, stats.oversized) == (3, 1)


def test_oversized_line_split_across_reads_is_skipped_once(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    h = Harness(str(tmp_path / "*.jsonl"), max_line=1000)
    f.write_bytes(line(1) + b'{"n": "big", "x": "' + b"y" * 3000)
    assert [d["n"] for d in h.read()] == [1]
    assert h.source.stats.oversized == 1
    h.restart()  # the skip state survives a restart
    with f.open("ab") as out:
        out.write(b"y" * 3000 + b'"}\n' + line(2))
    assert [d["n"] for d in h.read()] == [2]
    assert h.source.stats.oversized == 0  # the rest of the same line is not counted again


def test_file_without_complete_first_line_is_not_read(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    f.write_bytes(b'{"n": 1')
    h = Harness(str(tmp_path / "*.jsonl"))
    assert h.read() == []
    with f.open("ab") as out:
        out.write(b"}\n")
    assert h.read() == [{"n": 1}]


def test_lag_counts_the_bytes_not_yet_read(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    f.write_bytes(line(1) + b'{"n": 2, "par')
    h = Harness(str(tmp_path / "*.jsonl"))
    h.read()
    assert h.source.stats.as_dict()["lag_bytes"] == len(b'{"n": 2, "par')
    with f.open("ab") as out:
        out.write(b'tial": 1}\n')
    h.read()
    assert h.source.stats.as_dict()["lag_bytes"] == 0
