"""Session ids shortened for people: the shortest prefix (at least ``min_len``) that no other id shares."""

from __future__ import annotations

from collections.abc import Iterable


def shortest_unique(ids: Iterable[str], min_len: int = 8) -> dict[str, str]:
    """Each id to its shortest unique prefix of at least ``min_len`` characters (the whole id if need be).

    >>> shortest_unique(["019a1b2c-aaaa", "019a1b2c-bbbb", "7f3e"])
    {'019a1b2c-aaaa': '019a1b2c-a', '019a1b2c-bbbb': '019a1b2c-b', '7f3e': '7f3e'}
    """
    unique = sorted(set(ids))
    out: dict[str, str] = {}
    for i, sid in enumerate(unique):
        need = min_len
        for other in (unique[i - 1] if i else None, unique[i + 1] if i + 1 < len(unique) else None):
            if other is not None:
                need = max(need, _common(sid, other) + 1)
        out[sid] = sid[:need]
    return out


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
