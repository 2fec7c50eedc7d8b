"""TOML text from plain data (tables of strings, numbers, booleans, lists, nested tables and lists of
tables), checked by reading it back: what tomllib reads from the text is the data, or ValueError."""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from typing import Any

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def dumps(data: Mapping[str, Any]) -> str:
    lines: list[str] = []
    _table(lines, [], data, header=False)
    text = "\n".join(lines).strip("\n") + "\n"
    if tomllib.loads(text) != data:
        raise ValueError("the data has no TOML form this writer makes (e.g. a None)")
    return text


def key(name: str) -> str:
    return name if _BARE.match(name) else _string(name)


def _string(value: str) -> str:
    out = value.replace("\\", "\\\\").replace('"', '\\"')
    out = "".join(c if c >= " " and c != "\x7f" else f"\\u{ord(c):04x}" for c in out)
    return f'"{out}"'


def _is_table_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} has no TOML form here")
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"a {type(value).__name__} has no TOML form")


def _table(lines: list[str], path: list[str], data: Mapping[str, Any], header: bool, array: bool = False) -> None:
    name = ".".join(key(p) for p in path)
    direct = [k for k, v in data.items() if not isinstance(v, Mapping) and not _is_table_list(v)]
    if header and (direct or array or not data):  # a table of tables alone needs no header of its own
        lines += ["", f"[[{name}]]" if array else f"[{name}]"]
    lines += [f"{key(k)} = {_value(data[k])}" for k in direct]
    for k, v in data.items():
        if isinstance(v, Mapping):
            _table(lines, [*path, k], v, header=True)
        elif _is_table_list(v):
            for item in v:
                _table(lines, [*path, k], item, header=True, array=True)
