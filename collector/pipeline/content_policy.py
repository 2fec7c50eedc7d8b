"""Content capture policy: unless capture is on for the agent, prompts, completions, tool arguments and
results leave nothing but their length and a SHA-256 behind."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from collector.model.entry import CONTENT_FIELDS


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def apply_content_policy(entry: dict[str, Any], capture: bool) -> dict[str, Any]:
    if capture:
        return entry
    for field in CONTENT_FIELDS:
        value = entry.pop(field, None)
        if value is None:
            continue
        data = _as_bytes(value)
        entry[f"{field}.length"] = len(data)
        entry[f"{field}.sha256"] = hashlib.sha256(data).hexdigest()
    return entry
