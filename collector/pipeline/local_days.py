"""The local calendar day of a time, as the tracker's daily counters count it.

``strftime`` once per entry was a tenth of the status tracker's time, so :class:`LocalDays` remembers the
answer per minute; the answer is always the one :func:`local_day` gives for that very nanosecond, across
midnights and daylight-saving changes.
"""

from __future__ import annotations

import math
import time


def local_day(time_ns: int) -> str:
    """``YYYY-MM-DD`` of the local day ``time_ns`` falls on."""
    return time.strftime("%Y-%m-%d", time.localtime(time_ns / 1e9))


class LocalDays:
    """:func:`local_day`, remembered per minute (one strftime per entry was a tenth of the tracker's time):
    a minute is remembered when its first and last second fall on the same local day, so the answer is
    always the one :func:`local_day` gives."""

    def __init__(self, cap: int = 4096) -> None:
        self._minutes: dict[int, str] = {}
        self._cap = cap

    def __call__(self, time_ns: int) -> str:
        second = math.floor(time_ns / 1e9)  # the second time.localtime takes of the same float
        day = self._minutes.get(second // 60)
        if day is None:
            day = local_day(time_ns)
            first = second - second % 60
            if local_day(first * 1_000_000_000) == local_day((first + 59) * 1_000_000_000):
                if len(self._minutes) >= self._cap:
                    self._minutes.clear()
                self._minutes[second // 60] = day
        return day
