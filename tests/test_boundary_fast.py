"""The boundary's fast path for records decoded from JSON text gives what the walk gives: a record it lets
through unchanged is one the walk would let through unchanged, at every depth, size and integer edge."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from collector.model.raw import RawRecord
from collector.pipeline.boundary import MAX_DEPTH, Refused, _scan, _strict_json_fits, check_record
from collector.sources.decode import loads
from tests.support import FIXTURES


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
    if _strict_json_fits(data):
        assert problem is None and not unsafe
    for strict in (False, True):
        try:
            out = check_record(_record(data, strict))
        except Refused:
            assert problem is not None
            continue
        assert problem is None
        assert (out.data is data) == (not unsafe)


def test_every_fixture_line_takes_the_fast_path_and_the_walk_agrees() -> None:
    lines = [line for path in sorted(FIXTURES.glob("*/*/home/**/*.jsonl")) for line in path.read_bytes().splitlines()
             if line.strip()]
    assert len(lines) > 500
    for line in lines:
        data = loads(line)
        assert _strict_json_fits(data)
        assert _scan(data, MAX_DEPTH, 1_000_000) == (None, False)


def test_lenient_decoding_keeps_floats_finite() -> None:
    data = loads(b'{"a": "\\ud83d", "big": 1e400, "neg": -1e400, "ok": 2.5}')
    assert data == {"a": "\ufffd", "big": "inf", "neg": "-inf", "ok": 2.5}
    assert _strict_json_fits(data)
    assert orjson.loads(orjson.dumps(data)) == json.loads(json.dumps(data))
