"""AgentActivityEntry: the one event schema every agent is turned into.

Entries are flat dictionaries with dotted keys and JSON-native values; the dataclass below only builds
them. ``schemas/activity-event.schema.json`` documents every field; README.md explains them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from collector import SCHEMA_VERSION

EVENT_NAMES = (
    "session.start",
    "session.end",
    "user.prompt",
    "llm.request",
    "llm.response",
    "tool.call",
    "tool.result",
    "tool.approve",
    "subagent.start",
    "subagent.end",
    "compaction",
    "session.status",
    "error",
    "skill.use",  # LoongSuite Pilot's: a skill, extension or capability invocation (gen_ai.skill.*)
    "budget.threshold",  # the daemon's: a [budget] limit crossed warn_at or its amount
    "other",  # LoongSuite Pilot's: an event none of the others names
)

# Fields that can carry what the user or the model wrote. The content policy drops them unless content
# capture is on for the agent, keeping ``<field>.length`` and ``<field>.hmac``.
CONTENT_FIELDS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "error.message",
)


def event_id(*parts: object) -> str:
    """A deterministic id: the same native facts always give the same id (replays dedupe)."""
    try:
        text = "\x1f".join(parts)  # type: ignore[arg-type]  # the parsers' parts: strings, as a rule
    except TypeError:
        text = "\x1f".join(["" if p is None else str(p) for p in parts])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def payload_digest(payload: Any) -> str:
    return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()[:24]


def hook_call_key(payload: Any, time_ns: int) -> str:
    """Identity of one hook call that has no native id: what it said and when (to the millisecond)."""
    return f"{payload_digest(payload)}@{time_ns // 1_000_000}"


# The name of a marker a parser returns for a part of a record it had to leave out: the pipeline counts
# it (``PipelineStats.unreadable``) and exports nothing for it (``collector.agents.common.unreadable``).
UNREADABLE = "collector.unreadable"


def delivery_id(entry: Any) -> str | None:
    """What an exporter that drops an entry it delivered already (a replay after a crash) knows it by: its
    ``event.id``; for a correction (``collector.correction``, docs/merge.md), that id and the correction's
    own digest, so the correction is delivered once and the entry it corrects is not taken for it."""
    eid = entry.get("event.id") if isinstance(entry, dict) else None
    if not isinstance(eid, str):
        return None
    correction = entry.get("collector.correction")
    return f"{eid}/{correction}" if isinstance(correction, str) and correction else eid


@dataclass(slots=True)
class AgentActivityEntry:
    """Builder for one entry. ``attributes`` holds every optional dotted field."""

    name: str
    agent: str
    time_ns: int
    observed_ns: int
    id: str
    session_id: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema.version": SCHEMA_VERSION,
            "event.id": self.id,
            "event.name": self.name,
            "time_unix_nano": self.time_ns,
            "observed_time_unix_nano": self.observed_ns,
            "gen_ai.agent.type": self.agent,
        }
        if self.session_id:
            out["gen_ai.session.id"] = self.session_id
        for key, value in self.attributes.items():
            if value is not None:
                out[key] = value
        return out
