"""The idle rule: a session whose agent never says goodbye (a non-interactive run fires no session end)
is closed once its agent's idle timeout passed without an event (``SessionStatusTracker.expire_lots``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from collector.config import Config, agent_setting
from collector.definitions import AgentDefinition
from collector.pipeline.status import SessionStatusTracker

IDLE_LOT = 500  # saved sessions the idle rule loads, closes and commits at a time


@dataclass(slots=True)
class IdleRule:
    """Owns when a session counts as idle: each agent's idle timeout (``agents.<id>.idle_timeout_s`` in
    the config, else the definition's; none: the agent says goodbye), worked out once per agent since the
    rule asks for every session in memory at every cycle; the "now" it judges by (``clock``: tests judge
    captured sessions as long past); and the lot the saved sessions are closed in (``IDLE_LOT``)."""

    config: Config
    definitions: Mapping[str, AgentDefinition]  # the Service's, as agents join (external plugins)
    clock: Callable[[], int] = time.time_ns
    _timeouts: dict[str, int | None] = field(default_factory=dict)

    def timeout_ns(self, agent: str) -> int | None:
        if agent not in self._timeouts:
            defn = self.definitions.get(agent)
            seconds = agent_setting(self.config, agent, "idle_timeout_s",
                                    defn.raw.get("idle_timeout_s") if defn else None)
            self._timeouts[agent] = int(float(seconds) * 1e9) if seconds else None
        return self._timeouts[agent]

    def lots(self, tracker: SessionStatusTracker) -> Iterator[list[dict[str, Any]]]:
        """The entries closing the idle sessions, a lot at a time: commit each before asking for the next."""
        return tracker.expire_lots(self.clock(), self.timeout_ns, lot=IDLE_LOT)
