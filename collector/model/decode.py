"""Decode one JSON line or document the way agents really write them.

orjson is strict; two things real writers produce are accepted here instead of dropping the record: a
UTF-8 byte order mark before the JSON (skipped) and lone UTF-16 surrogate escapes (``"\\ud83d"``, how
Node writes an emoji cut in half), which become U+FFFD. Anything else that is not JSON still raises
``orjson.JSONDecodeError``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

from collector.model.boundary import shape

BOM = b"\xef\xbb\xbf"
_SURROGATE = re.compile("[\ud800-\udfff]")


def loads(raw: bytes) -> Any:
    if raw.startswith(BOM):
        raw = raw[len(BOM):]
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if b"\\u" not in raw and b"\\U" not in raw:
            raise
        return _lenient(raw, exc)


def loads_text(value: str | bytes) -> Any:
    """A JSON text held in a database column (a string, or bytes): as :func:`loads`."""
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            value = value.encode("utf-8", "replace")  # a lone surrogate character, if any, as "?"
    return loads(value)


def loads_object(raw: bytes) -> dict[str, Any] | None:
    """The decoded JSON object, or None when it is not JSON or not an object."""
    try:
        value = loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _lenient(raw: bytes, original: orjson.JSONDecodeError) -> Any:
    try:
        value = json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite)
    except (ValueError, RecursionError):
        raise original from None
    if shape(value) is not None:
        raise original
    return _replace_surrogates(value)


def _finite(text: str) -> float | str:
    """A number too large for a float (``1e400``) as the string the boundary would make of it, so that
    whatever this module returns holds finite floats only, as orjson's does."""
    value = float(text)
    return value if math.isfinite(value) else str(value)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    return value
