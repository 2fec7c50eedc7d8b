"""The facts of one hook event that matter for status, read from an entry or from a raw hook payload.

An entry built by an agent parser keeps them under its own attribute names (:data:`ENTRY_FIELDS`); a raw
payload under the names its agent's ``status`` rules give (``payload_fields``, dotted paths).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from collector.model.boundary import valid_time
from collector.model.entry import event_id, hook_call_key
from collector.util.epoch import epoch_number_to_ns

# Entry fields that carry the same facts, for entries built by the agent parsers.
ENTRY_FIELDS: dict[str, tuple[str, ...]] = {
    "session_id": ("gen_ai.session.id",),
    "tool_name": ("gen_ai.tool.name",),
    "tool_call_id": ("gen_ai.tool.call.id",),
    "tool_args_digest": ("gen_ai.tool.call.arguments.hmac",),
    "tool_input": ("gen_ai.tool.call.arguments",),
    "source": ("session.source",),
    "notification_type": ("notification.type",),
    "elicitation_id": ("elicitation.id",),
    "mcp_server": ("gen_ai.mcp.server.name", "mcp.server.name"),
    "wait_id": ("permission.id",),
    "state": ("agent.status",),
    "workspace": ("workspace.path",),
    "subagent_id": ("gen_ai.agent.id",),
}

# Copied from the triggering entry onto the session.status entry.
CONTEXT_FIELDS = ("user.id", "host.name", "workspace.path", "gen_ai.turn.id", "source.kind",
                  "gen_ai.agent.scope")


@dataclass(frozen=True, slots=True)
class Signal:
    """The facts of one hook event that matter for status."""

    agent: str
    session_id: str
    hook_event: str
    trigger_id: str
    time_ns: int
    observed_ns: int
    facts: Mapping[str, Any]
    context: Mapping[str, Any] = field(default_factory=dict)

    def get(self, name: str) -> str | None:
        value = self.facts.get(name)
        return None if value is None else str(value)


def _walk(payload: Mapping[str, Any], dotted: str) -> Any:
    node: Any = payload
    for part in dotted.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def first_value(source: Mapping[str, Any], paths: Iterable[str], walk: bool) -> Any:
    """The first value found at ``paths`` (``walk``: dotted paths into nested mappings), else None."""
    for path in paths:
        value = _walk(source, path) if walk else source.get(path)
        if value is not None:
            return value
    return None


def payload_id(agent: str, event: str, payload: Mapping[str, Any], time_ns: int) -> str:
    """The identity of a hook call: its payload and time (as the parsers' hook-only entries)."""
    return event_id(agent, event, hook_call_key(payload, time_ns))


def hook_time_ns(value: Any, observed_ns: int) -> int:
    """The envelope's ``ts`` (seconds, or ms/us/ns told by size) if it is a plausible time, else the
    observed time: a wrong clock or unit must not reach the saved session state."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        ns = epoch_number_to_ns(value)
        if ns is not None and valid_time(ns, observed_ns):
            return ns
    return observed_ns

