"""A circuit breaker for a polled program: after ``threshold`` failures in a row it opens and the next
attempt waits, doubling each further failure up to ``max_backoff_s``; one success closes it again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Breaker:
    interval_s: float
    threshold: int = 3
    max_backoff_s: float = 3600.0
    failures: int = 0  # in a row
    next_at: float = 0.0  # monotonic time of the next allowed attempt

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def succeeded(self, now: float) -> None:
        self.failures = 0
        self.next_at = now + self.interval_s

    def failed(self, now: float) -> None:
        self.failures += 1
        self.next_at = now + self.wait_s()

    @property
    def open(self) -> bool:
        return self.failures >= self.threshold

    def wait_s(self) -> float:
        """The pause after the current run of failures: the interval until the breaker opens, then the
        interval doubled per failure from the threshold on, at most ``max_backoff_s``."""
        if not self.open:
            return self.interval_s
        return float(min(self.max_backoff_s, self.interval_s * 2 ** (self.failures - self.threshold + 1)))

    def state(self, now: float) -> dict[str, Any]:
        return {"breaker": "open" if self.open else "closed", "consecutive_failures": self.failures,
                "next_run_in_s": round(max(0.0, self.next_at - now), 1)}
