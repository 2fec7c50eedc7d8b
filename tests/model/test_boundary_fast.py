"""The boundary's fast path for records decoded from JSON text gives what the walk gives: a record it lets
through unchanged is one the walk would let through unchanged, at every depth, size and integer edge."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from support import FIXTURES

from collector.model.boundary import MAX_DEPTH, Refused, _scan, check_record, strict_json_fits
from collector.model.decode import loads
from collector.model.raw import RawRecord


def _nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for n in range(depth):
        value = [value] if n % 2 else {"k": value}
    return value


def _record(data: Any, strict: bool) -> RawRecord:
    return RawRecord("a", "transcript", data, "s", "0", 1, {}, strict_json=strict)


CASES = [
    _nested(MAX_DEPTH - 1), _nested(MAX_DEPTH), _nested(MAX_DEPTH + 1), _nested(MAX_DEPTH, {}),
    _nested(MAX_DEPTH - 1, []), _nested(MAX_DEPTH + 1, []), _nested(300),
    {"n": 2**53}, {"n": 2**63 - 1}, {"n": 2**63}, {"n": -(2**63) - 1}, {"n": 18446744073709551615},
    {"x": [1.5, -0.0, 1e308], "s": "é \u2028 \"quoted\"\n"}, {}, {"a": []}, {"a": {"b": {}}},
]


@pytest.mark.parametrize("data", CASES, ids=range(len(CASES)))
def test_the_fast_path_agrees_with_the_walk(data: dict[str, Any]) -> None:
    problem, unsafe = _scan(data, MAX_DEPTH, 1_000_000)
    if strict_json_fits(data):
        assert problem is None and not unsafe
    for strict in (False, True):
        try:
            out = check_record(_record(data, strict))
        except Refused:
            assert problem is not None and not problem.startswith("nested")
            continue
        if problem is not None:  # too deep: read with its deepest containers cut
            assert problem.startswith("nested") and out.meta["truncated"] == problem
            assert _scan(out.data, MAX_DEPTH, 1_000_000)[0] is None
            continue
        assert (out.data is data) == (not unsafe)


def test_every_fixture_line_takes_the_fast_path_and_the_walk_agrees() -> None:
    lines = [line for path in sorted(FIXTURES.glob("*/*/home/**/*.jsonl")) for line in path.read_bytes().splitlines()
             if line.strip()]
    assert len(lines) > 500
    for line in lines:
        data = loads(line)
        assert strict_json_fits(data)
        assert _scan(data, MAX_DEPTH, 1_000_000) == (None, False)


def test_lenient_decoding_keeps_floats_finite() -> None:
    data = loads(b'{"a": "\\ud83d", "big": 1e400, "neg": -1e400, "ok": 2.5}')
    assert data == {"a": "\ufffd", "big": "inf", "neg": "-inf", "ok": 2.5}
    assert strict_json_fits(data)
    assert orjson.loads(orjson.dumps(data)) == json.loads(json.dumps(data))


def _read(path: Path) -> list[RawRecord]:
    from collector.sources.jsonl_files import JsonlFiles

    source = JsonlFiles("t:t", "t", "transcript", [str(path)], {})

    async def run() -> list[RawRecord]:
        return [record async for record, _ in source.read() if record is not None]

    return asyncio.run(run())


def test_the_source_judges_its_lines_as_the_boundary_would(tmp_path: Path) -> None:
    """A JSONL line within bounds is marked so as it is decoded (the boundary lets it in as it is); one too
    deep, or with an integer the fast path cannot judge, is not, and the boundary still walks it."""
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"n": 1, "text": "\\u00e9 {[ \\"x\\""}\n' + orjson.dumps(_nested(MAX_DEPTH + 1)) +
                     b'\n{"n": 9223372036854775808}\n{"n": 9007199254740993}\n')
    records = _read(path)
    assert [r.checked_data is r.data for r in records] == [True, False, False, False]
    assert check_record(records[0]) is records[0]
    cut = check_record(records[1])
    assert cut.meta["truncated"] == "nested deeper than 64" and _scan(cut.data, MAX_DEPTH, 1_000_000)[0] is None
    assert check_record(records[2]).data == {"n": "9223372036854775808"}
    assert check_record(records[3]) is records[3]
    other = replace(records[0], data=_nested(MAX_DEPTH + 1))  # what a wrapping source yields: other data
    assert check_record(other).meta["truncated"] == "nested deeper than 64"
    with pytest.raises(Refused, match="more than 3 values"):
        from collector.model import boundary

        saved, boundary.MAX_NODES = boundary.MAX_NODES, 3
        try:
            check_record(replace(records[0], data=[1, 2, 3, 4]))
        finally:
            boundary.MAX_NODES = saved


def test_the_size_bound_counts_lines_only_when_the_text_could_hold_that_many(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from collector.model import boundary

    monkeypatch.setattr(boundary, "MAX_NODES", 10)
    verdicts = {}
    for n in range(1, 14):
        data = {"a": list(range(n))}
        problem, _ = _scan(data, MAX_DEPTH, 10)
        verdicts[n] = strict_json_fits(data)
        assert problem is None or not verdicts[n], n  # never a record the walk would refuse
    assert verdicts[6] and not verdicts[7], "6 items make 9 lines of text, 7 make 10: not fewer than MAX_NODES"
    assert strict_json_fits({}) and strict_json_fits({"a": 1}), "shorter than MAX_NODES bytes: not counted"
