"""How far a masking rule's pattern can reach from a keyword it contains, so that it can run on windows
around the keyword occurrences instead of the whole text, with the same result.

If every match contains a keyword, is at most ``width`` characters long and its evaluation looks at most
``lookahead`` characters past its end, then every match lies in ``[k - width, k + len(keyword) + width]``
for an occurrence ``k``, and searching the merged windows (each extended by the look-ahead) finds exactly
the matches a search of the whole text finds. Look-behind sees before a window's start (``re`` does).
A pattern with an unbounded repeat or an end-of-text assertion has no reach: it runs on the whole text.
"""

from __future__ import annotations

import re
from re import _constants as _c  # type: ignore[attr-defined]
from re import _parser as _p  # type: ignore[attr-defined]
from typing import Any

MAX_REACH = 2048  # wider windows gain nothing over the whole text
_ENDS = {_c.AT_END, _c.AT_END_STRING, _c.AT_END_LINE}


def reach(pattern: str, flags: int = re.ASCII) -> tuple[int, int] | None:
    """(max match width, max look-ahead width), or None when unbounded."""
    try:
        parsed = _p.parse(pattern, flags)
        width = parsed.getwidth()[1]
        ahead = _lookahead(parsed.data)
    except (AttributeError, TypeError, ValueError, re.error):
        return None
    if ahead is None or width >= MAX_REACH or ahead >= MAX_REACH:
        return None
    return int(width), int(ahead)


def _lookahead(items: Any) -> int | None:
    """The widest look-ahead inside ``items``; None if an end assertion makes windows unsafe."""
    widest = 0
    for op, av in items:
        found: int | None = 0
        if op is _c.AT and av in _ENDS:
            return None
        if op in (_c.ASSERT, _c.ASSERT_NOT):
            direction, sub = av
            inner = _lookahead(sub.data)
            if inner is None:
                return None
            found = (sub.getwidth()[1] if direction == 1 else 0) + inner
        elif op is _c.SUBPATTERN:
            found = _lookahead(av[-1].data)
        elif op is _c.BRANCH:
            found = _widest(_lookahead(b.data) for b in av[1])
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT) or op is getattr(_c, "POSSESSIVE_REPEAT", None):
            found = _lookahead(av[2].data)
        elif op is getattr(_c, "ATOMIC_GROUP", None):
            found = _lookahead(av.data)
        elif op is _c.GROUPREF_EXISTS:
            found = _widest(_lookahead(b.data) for b in av[1:] if b is not None)
        if found is None:
            return None
        widest = max(widest, found)
    return widest


def _widest(values: Any) -> int | None:
    out = 0
    for value in values:
        if value is None:
            return None
        out = max(out, value)
    return out


def windows(haystack: str, needles: tuple[str, ...], width: int, ahead: int) -> list[tuple[int, int]]:
    """Merged (start, end) windows around every occurrence of the needles."""
    spans = []
    size = len(haystack)
    for needle in needles:
        at = haystack.find(needle)
        while at >= 0:
            spans.append((max(0, at - width), min(size, at + len(needle) + width + ahead + 1)))
            at = haystack.find(needle, at + 1)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
