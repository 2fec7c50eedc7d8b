"""Values a source keeps in a position (a watermark, a key), checked where they are read.

A column's declared type does not bind SQLite: a watermark may be an integer, a real, text or a BLOB in
any row, whatever the schema says. A position is saved as JSON by the checkpoint store and its values are
bound again as query parameters by the next read, so each value of a position must survive both ways:
:func:`saveable` gives a JSON value for any SQLite value (a BLOB as ``{"blob": hex}``, a non-finite real
as ``{"real": "inf"}``) and :func:`restored` the SQLite value back. A watermark that is neither a finite
number nor text, or of another kind than the table's so far (:func:`usable_watermark`), cannot be the
position of the rows after it (SQLite orders every number before every text and every text before every
BLOB: a position at such a value would pass every later row of the table's kind by), so the row is refused
(:data:`REFUSED`, the boundary quarantines it) and kept apart.
"""

from __future__ import annotations

import math
from typing import Any

from collector.model.raw import REFUSED

__all__ = ["REFUSED", "kind_of", "restored", "same_kind_sql", "saveable", "usable_watermark"]

INT64 = 2**63


def usable_watermark(value: Any, like: Any = None) -> bool:
    """A finite number within int64 (a real one too), or text: what a row's position can hold. With
    ``like`` (the table's watermark so far), of the same kind: a text among numbers, or a number among
    texts, would pass every later row of the table's own kind by."""
    kind = value.__class__
    number = (-INT64 <= value < INT64) if kind is int else (kind is float and math.isfinite(value))
    if like is None:
        return number or kind is str
    return (kind is str) if like.__class__ is str else number


def same_kind_sql(column: str, like: Any) -> str:
    """SQL true for the rows whose watermark is of the kind :func:`usable_watermark` takes after ``like``."""
    if like.__class__ is str:
        return f"typeof({column}) = 'text'"
    return f"(typeof({column}) IN ('integer', 'real') AND abs({column}) < 9e999)"


def saveable(value: Any) -> Any:
    """``value`` as JSON the checkpoint store can save and :func:`restored` gives back."""
    kind = value.__class__
    if kind is str or value is None or (kind is int and -INT64 <= value < INT64):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"real": repr(value)}
    if kind is bytes:
        return {"blob": value.hex()}
    return {"text": str(value)}


def restored(value: Any) -> Any:
    """The value :func:`saveable` was given (anything else a saved position holds: as it is)."""
    if isinstance(value, dict) and len(value) == 1:
        try:
            if "blob" in value:
                return bytes.fromhex(str(value["blob"]))
            if "real" in value:
                return float(str(value["real"]))
        except ValueError:
            return None
        if "text" in value:
            return str(value["text"])
    return value


def kind_of(value: Any) -> str:
    """What a value is, for a refusal's reason (never the value itself)."""
    if isinstance(value, bytes):
        return "a BLOB"
    if isinstance(value, str):
        return "text"
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return "a non-finite number"
    return f"a {type(value).__name__}"
