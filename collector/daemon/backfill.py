"""How far a collection cycle is: bytes read of the bytes waiting at its start, records, percent, ETA.

The work is estimated from the file sources that can say how many bytes lie past their checkpoints
(``pending_bytes()``); sources that cannot (SQLite stores) count in records only. The same ``Meter``
drives the progress line of ``collect --once`` and the progress a daemon reports to a ``collect --once``
that handed it the work (``collector.daemon.handoff``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from collector.sources.base import Source


@dataclass(frozen=True, slots=True)
class ProgressState:
    records: int
    done_bytes: int
    total_bytes: int
    elapsed_s: float
    source: str

    @property
    def fraction(self) -> float | None:
        """Done share of the estimated work, below 1 until the cycle ends (files may grow meanwhile)."""
        if self.total_bytes <= 0:
            return None
        return min(self.done_bytes / self.total_bytes, 0.99)

    @property
    def eta_s(self) -> float | None:
        fraction = self.fraction
        if not fraction or self.elapsed_s <= 0:
            return None
        return self.elapsed_s * (1 - fraction) / fraction

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProgressState:
        return cls(int(data["records"]), int(data["done_bytes"]), int(data["total_bytes"]),
                   float(data["elapsed_s"]), str(data["source"]))


def pending_bytes(sources: Sequence[Source]) -> int:
    total = 0
    for source in sources:
        estimate = getattr(source, "pending_bytes", None)
        if callable(estimate):
            total += int(estimate())
    return total


def bytes_read(sources: Sequence[Source]) -> int:
    return sum(source.stats.bytes for source in sources)


class Meter:
    """Called with (source name, records so far) after each batch; keeps the latest ``ProgressState``."""

    def __init__(self, sources: Sequence[Source], on_state: Callable[[ProgressState], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._sources = sources
        self._clock = clock
        self._on_state = on_state
        self._started = clock()
        self._base = bytes_read(sources)
        self.total = pending_bytes(sources)
        self.state = ProgressState(0, 0, self.total, 0.0, "")

    def __call__(self, source: str, records: int) -> None:
        done = bytes_read(self._sources) - self._base
        self.state = ProgressState(records, done, max(self.total, done), self._clock() - self._started, source)
        if self._on_state is not None:
            self._on_state(self.state)


def render(state: ProgressState) -> str:
    """One terminal line: ``  42%  1.2 MB of 2.9 MB  12,345 records  ETA 0:14  <source>``."""
    fraction = state.fraction
    if fraction is None:
        head = f"{state.records:>10,} records"
    else:
        head = (f"{fraction * 100:3.0f}%  {_size(state.done_bytes)} of {_size(state.total_bytes)}  "
                f"{state.records:,} records  ETA {_clock(state.eta_s)}")
    return f"{head}  {state.source[:40]}".rstrip()


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-:--"
    minutes, secs = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
