"""The hook protocol Claude Code defined and Codex and Qwen Code copied: which entry each event makes and
which payload fields it reads.

One table maps the events: ``SessionStart``/``SessionEnd`` -> session.start/session.end,
``UserPromptSubmit`` -> user.prompt, ``PreToolUse`` -> tool.call, ``PostToolUse``/``PostToolUseFailure``
-> tool.result, ``PermissionRequest``/``PermissionDenied`` -> tool.approve, ``SubagentStart``/
``SubagentStop`` -> subagent.start/subagent.end; ``Stop``, ``StopFailure``, ``Notification``,
``PreCompact`` and ``PostCompact`` make none (the status tracker reads them; a compaction is in the
agent's own files). The payload fields are Claude Code's (``session_id``, ``prompt``, ``tool_name``,
``tool_input``, ``tool_use_id``, ``tool_response``, ``agent_id``, ...). A :class:`Dialect` says where a
member differs: another field for the turn or the session, which ids it gives, what a tool result says,
which events it lacks or adds, and, for a member that renamed the events (Cursor's ``preToolUse``), which
of the protocol's events each of its names is. Each default is what Claude Code does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from collector.agents.common import HookEnvelope, HookHandler, dispatch_hook, hook_entry, no_entry, text_message
from collector.model import AgentActivityEntry, RawRecord

Reader = Callable[[HookEnvelope], Any]
"""What a member reads from a hook payload its own way."""
IdReader = Callable[[Any], Any]
"""How a member takes an id field's value (as given, only a string, ...)."""


def as_given(value: Any) -> Any:
    """An id as the payload gives it."""
    return value


def only_string(value: Any) -> str | None:
    """An id only when it is a string."""
    return value if isinstance(value, str) else None


def text_or_none(value: Any) -> str | None:
    """An id only when it is a non-empty string."""
    return value if isinstance(value, str) and value else None


def _no_id(hook: HookEnvelope) -> None:
    """No native id: the entry's id comes from the payload and the hook's time."""
    return None


def _no_attributes(hook: HookEnvelope) -> dict[str, Any]:
    return {}


def _always(hook: HookEnvelope) -> bool:
    return True


def _tool_use_id(hook: HookEnvelope) -> Any:
    return hook.get("tool_use_id")


def tool_failure(hook: HookEnvelope, message: Any, exit_code: int | None = None) -> dict[str, Any]:
    """The status of a ``PostToolUseFailure``: cancelled when the user interrupted the tool
    (``is_interrupt``), else an error (a non-zero exit code, when the member finds one, says so)."""
    interrupted = bool(hook.get("is_interrupt"))
    return {
        "tool.result.status": "cancelled" if interrupted else "error",
        "error.type": "interrupted" if interrupted else "exit_code" if exit_code else "tool_error",
        "error.message": message,
    }


def _failure(hook: HookEnvelope) -> dict[str, Any]:
    """Claude Code's failure: its ``error`` is the message, as it is."""
    return tool_failure(hook, hook.get("error"))


def _subagent(hook: HookEnvelope) -> dict[str, Any]:
    """Claude Code's sub-agent events name the Task/Agent tool call that started the sub-agent."""
    return {
        "gen_ai.agent.scope": "subagent",
        "gen_ai.subagent.type": hook.get("agent_type"),
        "gen_ai.agent.id": hook.get("agent_id"),
        "gen_ai.subagent.parent_tool_call.id": hook.get("tool_use_id"),
    }


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one member of the family fills the protocol in; each default is Claude Code's way."""

    success: Reader
    """The attributes of a ``PostToolUse`` beyond the tool's (status, result)."""
    failure: Reader = _failure
    """The attributes of a ``PostToolUseFailure`` beyond the tool's."""
    session_fields: tuple[str, ...] = ("session_id",)
    """The payload fields naming the session, the first that holds a string wins."""
    turn_field: str = "prompt_id"
    """The payload field naming the turn (the prompt's and the tool calls')."""
    prompt_turn: IdReader = as_given
    """A prompt's turn id, from ``turn_field``."""
    prompt_key: IdReader = as_given
    """A prompt's native id (which its transcript entry shares), from its turn id."""
    prompt_origin: Callable[[str], str] | None = None
    """``prompt.origin`` from a prompt's text, for a member that tells a user from a machine."""
    drops_empty_prompts: bool = False
    """Whether an empty prompt is a repeat (Qwen sends a second, empty one after a tool batch)."""
    tool_turn: IdReader = as_given
    """A tool or approval hook's turn id, from ``turn_field``."""
    call_id: Reader = _tool_use_id
    """A tool hook's call id, the native id the transcript's tool call shares."""
    describes_tool: Callable[[HookEnvelope], bool] = _always
    """Whether a tool hook makes an entry (not when the member's transcript is authoritative for it)."""
    agent_tools: frozenset[str] = frozenset()
    """The tools that start a sub-agent (``gen_ai.tool.type`` agent); none: that attribute is left out."""
    tool_scope: Reader = _no_attributes
    """Attributes saying a tool hook came from inside a sub-agent."""
    times_tools: bool = True
    """Whether a tool result carries the payload's ``duration_ms``."""
    subagent: Reader = _subagent
    """The attributes of a ``SubagentStart``/``SubagentStop``."""
    subagent_key: Reader = _no_id
    """A sub-agent event's native id, where the member's own files report the same event."""
    start_key: Reader = _no_id
    """A ``SessionStart``'s native id."""
    end_key: Reader = _no_id
    """A ``SessionEnd``'s native id."""
    extra: Mapping[str, HookHandler] = field(default_factory=dict)
    """Events the member adds, or handles its own way."""
    silent: frozenset[str] = frozenset()
    """Events the member adds that make no entry (the status tracker reads them)."""
    lacks: frozenset[str] = frozenset()
    """Events the member does not have: they make nothing."""
    aliases: Mapping[str, str] = field(default_factory=dict)
    """The member's own event names -> the protocol's (``{"preToolUse": "PreToolUse"}``); the entries keep
    the member's name in ``agent.hook_event_name``."""


class HookProtocol:
    """The handlers of the protocol's events for one member; :meth:`parse` reads one hook record."""

    __slots__ = ("dialect", "handlers")

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        table: dict[str, HookHandler] = {
            "SessionStart": self._session_start,
            "SessionEnd": self._session_end,
            "UserPromptSubmit": self._prompt,
            "PreToolUse": self._pre_tool,
            "PostToolUse": self._post_tool,
            "PostToolUseFailure": self._post_tool,
            "PermissionRequest": self._permission,
            "PermissionDenied": self._permission,
            "SubagentStart": self._subagent,
            "SubagentStop": self._subagent,
            "PreCompact": no_entry,
            "PostCompact": no_entry,
            "Stop": no_entry,
            "StopFailure": no_entry,
            "Notification": no_entry,
            **dict.fromkeys(dialect.silent, no_entry),
            **dialect.extra,
        }
        self.handlers = {event: handler for event, handler in table.items() if event not in dialect.lacks}
        for own, event in dialect.aliases.items():
            if event in self.handlers:
                self.handlers[own] = self.handlers[event]

    def _event(self, hook: HookEnvelope) -> str:
        """The protocol's name of the hook's event."""
        return self.dialect.aliases.get(hook.event, hook.event)

    def parse(self, record: RawRecord) -> list[AgentActivityEntry]:
        """The entries of one hook record; an event without a handler makes none."""
        return dispatch_hook(record, self.handlers, self.dialect.session_fields)

    def _session_start(self, record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
        attrs = {"session.source": hook.get("source"), "agent.model": hook.get("model")}
        return [hook_entry(record, hook, "session.start", session, self.dialect.start_key(hook), attrs)]

    def _session_end(self, record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
        attrs = {"session.reason": hook.get("reason")}
        return [hook_entry(record, hook, "session.end", session, self.dialect.end_key(hook), attrs)]

    def _prompt(self, record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
        d = self.dialect
        text = hook.get("prompt", "")
        if d.drops_empty_prompts and (not isinstance(text, str) or not text):
            return []
        text, turn = str(text), d.prompt_turn(hook.get(d.turn_field))
        attrs = {"gen_ai.turn.id": turn, "gen_ai.input.messages": text_message("user", text)}
        if d.prompt_origin is not None:
            attrs["prompt.origin"] = d.prompt_origin(text)
        return [hook_entry(record, hook, "user.prompt", session, d.prompt_key(turn), attrs)]

    def _tool_attrs(self, hook: HookEnvelope) -> dict[str, Any]:
        """What every tool and approval hook says of its tool call."""
        d = self.dialect
        name = hook.get("tool_name")
        attrs = {**d.tool_scope(hook), "gen_ai.turn.id": d.tool_turn(hook.get(d.turn_field)),
                 "gen_ai.tool.name": name}
        if d.agent_tools:
            attrs["gen_ai.tool.type"] = "agent" if name in d.agent_tools else None
        attrs["gen_ai.tool.call.id"] = d.call_id(hook)
        attrs["gen_ai.tool.call.arguments"] = hook.get("tool_input")
        return attrs

    def _pre_tool(self, record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
        if not self.dialect.describes_tool(hook):
            return []
        return [hook_entry(record, hook, "tool.call", session, self.dialect.call_id(hook), self._tool_attrs(hook))]

    def _post_tool(self, record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
        d = self.dialect
        if not d.describes_tool(hook):
            return []
        attrs = self._tool_attrs(hook)
        if d.times_tools:
            attrs["duration_ms"] = hook.get("duration_ms")
        attrs.update(d.failure(hook) if self._event(hook) == "PostToolUseFailure" else d.success(hook))
        return [hook_entry(record, hook, "tool.result", session, d.call_id(hook), attrs)]

    def _permission(self, record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
        attrs = self._tool_attrs(hook)
        attrs["tool.approve.decision"] = "deny" if self._event(hook) == "PermissionDenied" else "ask"
        return [hook_entry(record, hook, "tool.approve", session, attributes=attrs)]

    def _subagent(self, record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
        name = "subagent.start" if self._event(hook) == "SubagentStart" else "subagent.end"
        return [hook_entry(record, hook, name, session, self.dialect.subagent_key(hook), self.dialect.subagent(hook))]
