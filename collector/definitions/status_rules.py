"""What an agent's hook events do to its sessions, as data: the ``status`` section of the agent's
definition (``agents.d/<id>.json``, validated by ``schemas/agent-definition.schema.json``).

``events`` maps a hook event name to an action, or to a conditional on one fact of the event:
``{"field", "in", "then", "else"}`` (the fact is one of ``in``) or ``{"field", "present", "then", "else"}``
(the fact is there at all, e.g. an id that an agent's hooks carry only inside a sub-agent);
``payload_fields`` says where each fact lives in the raw hook payload (first path present wins, ``"a.b"``
walks into objects). The tracker in
:mod:`collector.pipeline.status` applies the actions; it knows no agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# What a hook event does to a session.
START = "start"  # base idle, waits cleared; a compaction restart keeps everything
PROMPT = "prompt"  # base running, waits cleared (the user answered whatever was pending)
ACTIVITY = "activity"  # base running (the agent is working)
ASK = "ask"  # a question tool starts: opens a wait keyed by its tool call id
PERMISSION = "permission"  # a permission request: opens a wait keyed by the tool call it is for
ELICIT = "elicit"  # an MCP elicitation: opens a wait keyed by the elicitation id
BLOCKED = "blocked"  # a notification that the agent is blocked on the user: a wait keyed by its type
RESOLVE = "resolve"  # a tool result or permission decision: clears the matching wait
RESOLVE_ELICIT = "resolve_elicit"  # an elicitation result: clears the matching elicitation wait
SETTLE = "settle"  # the turn ended: ready_for_review
FAIL = "fail"  # the turn ended with an error: error
END = "end"  # the session ended: closed
IGNORE = "ignore"
ACTIONS = (START, PROMPT, ACTIVITY, ASK, PERMISSION, ELICIT, BLOCKED, RESOLVE, RESOLVE_ELICIT, SETTLE, FAIL,
           END, IGNORE)


class StatusRulesError(ValueError):
    """A ``status`` section the tracker cannot use (the schema check normally catches it first)."""


@dataclass(frozen=True, slots=True)
class When:
    """A conditional rule: ``then`` if the signal's ``field`` is one of ``values`` (``values`` None: if
    the field is there at all), else ``otherwise``."""

    field: str
    values: frozenset[str] | None
    then: str
    otherwise: str

    def holds(self, value: str | None) -> bool:
        if self.values is None:
            return bool(value)
        return value in self.values


Rule = str | When


@dataclass(frozen=True, slots=True)
class AgentStatusRules:
    """One agent's rules: hook event name -> rule, and fact name -> payload paths."""

    events: Mapping[str, Rule] = field(default_factory=dict)
    payload_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def rule(self, hook_event: str) -> Rule:
        return self.events.get(hook_event, IGNORE)

    @classmethod
    def from_data(cls, data: Mapping[str, Any] | None) -> AgentStatusRules:
        """From a definition's ``status`` section; ``None`` (no section) gives rules that ignore everything."""
        if not data:
            return cls()
        events = {str(name): _rule(name, value) for name, value in dict(data.get("events", {})).items()}
        fields = {str(name): tuple(str(p) for p in paths)
                  for name, paths in dict(data.get("payload_fields", {})).items()}
        return cls(events, fields)


def _action(event: str, value: Any) -> str:
    if value not in ACTIONS:
        raise StatusRulesError(f"status.events.{event}: unknown action {value!r}")
    return str(value)


def _rule(event: str, value: Any) -> Rule:
    if isinstance(value, Mapping):
        then, otherwise = _action(event, value["then"]), _action(event, value["else"])
        if "present" in value:  # present: false swaps the branches
            return When(str(value["field"]), None, *((then, otherwise) if value["present"] else (otherwise, then)))
        return When(str(value["field"]), frozenset(str(v) for v in value["in"]), then, otherwise)
    return _action(event, value)
