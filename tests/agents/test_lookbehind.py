"""Reading the JSON lines before an offset, nearest first, across read-block boundaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collector.agents import lookbehind


@pytest.mark.parametrize(("first", "chunk"), [(7, 7), (3, 64), (16, 1 << 16), (4096, 1 << 16)])
def test_lines_before_an_offset_nearest_first(tmp_path: Path, first: int, chunk: int,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The reads start small and grow (FIRST_CHUNK, then up to CHUNK): the same lines whatever the sizes."""
    monkeypatch.setattr(lookbehind, "FIRST_CHUNK", first)
    monkeypatch.setattr(lookbehind, "CHUNK", chunk)
    lines = [json.dumps({"n": n, "pad": "x" * n}) for n in range(20)]
    lines.insert(5, "not json")
    lines.insert(9, "[1, 2]")
    path = tmp_path / "log.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    end = sum(len(line) + 1 for line in lines[:15])  # the offset where line 15 starts
    got = [d["n"] for d in lookbehind.lines_before(str(path), end)]
    assert got == list(range(12, -1, -1))


def test_the_look_back_is_bounded_and_a_missing_file_gives_nothing(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps({"n": n}) + "\n" for n in range(100)))
    size = path.stat().st_size
    got = [d["n"] for d in lookbehind.lines_before(str(path), size, limit=40)]
    assert got and got[0] == 99 and len(got) < 5
    assert list(lookbehind.lines_before(str(tmp_path / "gone.jsonl"), 10)) == []
