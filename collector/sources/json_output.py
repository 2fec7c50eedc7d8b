"""What a polled program printed, as records: one JSON document (an object, or an array of objects, or an
object holding such an array at a dotted path), else JSON lines (one object per line). Values that are
not objects, and lines that are not JSON, are counted as malformed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass(slots=True)
class Parsed:
    records: list[dict[str, Any]] = field(default_factory=list)
    malformed: int = 0


def parse_output(data: bytes, path: str | None = None) -> Parsed:
    text = data.strip()
    if not text:
        return Parsed()
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _lines(text)
    return _document(document, path)


def _document(document: Any, path: str | None) -> Parsed:
    for key in path.split(".") if path else ():
        document = document.get(key) if isinstance(document, dict) else None
    items = document if isinstance(document, list) else [document]
    out = Parsed()
    for item in items:
        if isinstance(item, dict):
            out.records.append(item)
        else:
            out.malformed += 1
    return out


def _lines(text: bytes) -> Parsed:
    out = Parsed()
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            out.malformed += 1
            continue
        if isinstance(value, dict):
            out.records.append(value)
        else:
            out.malformed += 1
    return out
