"""The bytes a content value (a prompt, tool arguments, a tool result) is measured and digested as, the
same for the content policy's lengths and HMACs and the usage store's argument digests and result sizes."""

from __future__ import annotations

from typing import Any

import orjson


def content_bytes(value: Any) -> bytes:
    """UTF-8 for text (lone surrogates kept as they are), sorted JSON otherwise."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
