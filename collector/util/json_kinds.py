"""A JSON value's kind in the words a reason uses (``a list``, ``a string``, ``null``): one table for the
parsers' markers and the pipeline's declared field types, so that both say it alike."""

from __future__ import annotations

from typing import Any

# checked in this order: a boolean is an int in Python, never a number in JSON
KIND_NAMES: dict[type, str] = {bool: "a boolean", int: "a number", float: "a number", str: "a string",
                               list: "a list", dict: "an object"}


def json_type(value: Any) -> str:
    """A JSON value's kind as a reason names it: ``a list``, ``a string``, ``a number``, ``null``..."""
    if value is None:
        return "null"
    return next((name for kind, name in KIND_NAMES.items() if isinstance(value, kind)), type(value).__name__)
