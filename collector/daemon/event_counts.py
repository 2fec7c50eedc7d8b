"""How many entries each agent had written today, and the time of its newest one (status ``agents``)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

KEY = "events_today"  # where the counts are saved in the checkpoint store (with every batch's commit)


def _utc_day() -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())


@dataclass(slots=True)
class EventCounts:
    """Owns the entries written per agent on the current UTC day (of writing) and the newest entry time
    per agent; saved with the checkpoints (``KEY``) so that today's counts survive a restart."""

    today: str = field(default_factory=_utc_day)
    counts: dict[str, int] = field(default_factory=dict)
    last: dict[str, int] = field(default_factory=dict)

    def restore(self, saved: dict[str, Any]) -> None:
        """What a commit saved (``saved()``); another day's counts are not today's."""
        if saved.get("day") == self.today:
            self.counts = dict(saved.get("counts", {}))
            self.last = dict(saved.get("last", {}))

    def add(self, entries: Iterable[dict[str, Any]], by_agent: dict[str, int]) -> None:
        """Count ``entries`` (also into ``by_agent``, a cycle's own counts); a new day starts from zero."""
        today = _utc_day()
        if today != self.today:
            self.today, self.counts = today, {}
        for entry in entries:
            agent = entry["gen_ai.agent.type"]
            by_agent[agent] = by_agent.get(agent, 0) + 1
            self.counts[agent] = self.counts.get(agent, 0) + 1
            self.last[agent] = max(self.last.get(agent, 0), entry["time_unix_nano"])

    def saved(self) -> dict[str, Any]:
        return {"day": self.today, "counts": dict(self.counts), "last": dict(self.last)}

    def of(self, agent: str) -> dict[str, Any]:
        return {"events_today": self.counts.get(agent, 0), "last_event_ns": self.last.get(agent)}
