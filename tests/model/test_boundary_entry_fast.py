"""check_entry's fast path (``_fits``) lets a value through unchanged only where the full check
(``_checked``) would keep it equal, of the same types, with no problem: for every kind of field and every
kind of value, hostile ones included."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from collector.model import boundary
from collector.model.boundary import MAX_DEPTH, _checked, _fits, check_entry


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    ONE = 1


@dataclass
class Point:
    x: int


class Text(str):
    pass


def _nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for n in range(depth):
        value = [value] if n % 2 else {"k": value}
    return value


KEYS = ["gen_ai.tool.name", "gen_ai.usage.input_tokens", "gen_ai.tool.call.arguments.length", "duration_ms",
        "tool.result.status", "session.previous_status", "gen_ai.response.finish_reasons",
        "gen_ai.input.messages", "gen_ai.tool.call.arguments", "turn.key", "process.exit.code"]
VALUES: list[Any] = [
    "x", "success", "running", "é", "\ud800", Text("x"), "", 0, 1, -1, 2**53 - 1, 2**53, 2**63 - 1, 2**63,
    -(2**63), -(2**63) - 1, True, False, None, 1.0, 1.5, -0.5, float("nan"), float("inf"), 1e300,
    [], {}, ["stop", "length"], ["stop", 1], [1, 2.5, "a", None, True], {"a": [1, {"b": "c"}]},
    {"a": float("nan")}, [float("-inf")], {"a": (1, 2)}, (1, 2), [Colour.RED], [Level.ONE], [uuid.UUID(int=1)],
    {1: "a"}, {"\ud800": 1}, ["\udfff"], [2**53], [2**63], {"a": Point(1)}, [Text("x")], {"a": {1, 2}},
    _nested(MAX_DEPTH - 1), _nested(MAX_DEPTH), _nested(MAX_DEPTH + 1), _nested(MAX_DEPTH, []),
    _nested(MAX_DEPTH + 1, {}), _nested(300), [object()],
]


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (1 == 1.0 == True would not tell them apart)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


@pytest.mark.parametrize("key", KEYS)
def test_a_value_the_fast_path_keeps_is_one_the_full_check_keeps(key: str) -> None:
    kept = 0
    for value in VALUES:
        if _fits(key, value):
            kept += 1
            checked, problem = _checked(key, value)
            assert problem is None and _same(checked, value), (key, value)
    assert kept  # every field has values that take the fast path


def test_every_hostile_value_goes_to_the_full_check() -> None:
    for value in [float("nan"), "\ud800", 2**63, {"a": (1, 2)}, [Colour.RED], [uuid.UUID(int=1)], {1: "a"},
                  {"\ud800": 1}, ["\udfff"], {"a": Point(1)}, _nested(MAX_DEPTH + 1), [object()], [2**63]]:
        assert not _fits("gen_ai.tool.call.arguments", value), value


def test_check_entry_makes_the_same_entry_as_the_full_check_of_every_field(monkeypatch: pytest.MonkeyPatch) -> None:
    def entry() -> dict[str, Any]:
        out: dict[str, Any] = {"schema.version": "1.0", "event.id": "e", "event.name": "tool.call",
                               "time_unix_nano": 10**18, "observed_time_unix_nano": 10**18,
                               "gen_ai.tool.call.id": "c"}
        for n, value in enumerate(VALUES[:-1]):  # object() has no JSON encoding to compare
            out[f"{KEYS[n % len(KEYS)]}"] = value
            out[f"x.{n}"] = value
        return out

    fast = check_entry(entry())
    monkeypatch.setattr(boundary, "_fits", lambda key, value: False)
    full = check_entry(entry())
    assert orjson.dumps(fast) == orjson.dumps(full)
    assert fast["collector.invalid_fields"] == full["collector.invalid_fields"]


def test_a_wide_value_is_judged_by_its_indentation_and_a_long_one_is_walked() -> None:
    wide = [{"k": [n]} for n in range(100)]  # 201 brackets, 3 deep
    assert _fits("gen_ai.tool.call.arguments", wide)
    assert _fits("gen_ai.tool.call.arguments", [wide, _nested(MAX_DEPTH - 2)])  # its leaf 64 deep
    assert not _fits("gen_ai.tool.call.arguments", [wide, _nested(MAX_DEPTH)])  # 65 deep
    long = [{"k": "x" * 1000} for _ in range(300)]  # more than boundary._INDENTED_AT_MOST bytes
    assert not _fits("gen_ai.tool.call.arguments", long)
    assert _checked("gen_ai.tool.call.arguments", long) == (long, None)
