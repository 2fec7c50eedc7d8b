"""Epoch numbers of unknown unit to nanoseconds: seconds, milliseconds, microseconds or nanoseconds are
told apart by their size (1e11 s is the year 5138; 1e14 ms and 1e17 us are the same instant). Whether the
instant is plausible is the caller's question (``collector.model.boundary.valid_time``)."""

from __future__ import annotations

import math

INT64_MAX = (1 << 63) - 1


def epoch_number_to_ns(value: float) -> int | None:
    """``value`` (not a bool) in nanoseconds; None for 0 or a value that is not finite. Before 1970 a
    value is taken as seconds and returned negative, past what int64 holds it is clamped to INT64_MAX."""
    if not math.isfinite(value) or value == 0:
        return None
    if value < 0:
        return -INT64_MAX if value < -9e9 else min(-1, int(value * 1_000_000_000))
    for limit, scale in ((1e11, 1_000_000_000), (1e14, 1_000_000), (1e17, 1_000)):
        if value < limit:
            return int(value * scale) if isinstance(value, float) else value * scale
    return min(INT64_MAX, int(value))
