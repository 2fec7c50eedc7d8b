"""Helpers shared by the agent parsers: times, hook envelopes, tokens, entry construction."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from collector.model import AgentActivityEntry, RawRecord, event_id
from collector.model.entry import UNREADABLE, hook_call_key
from collector.model.entry import payload_digest as payload_digest  # re-exported for the parsers
from collector.util.epoch import epoch_number_to_ns
from collector.util.json_kinds import KIND_NAMES, json_type


def iso_to_ns(value: Any) -> int | None:
    """ISO 8601 (``2026-11-30T11:15:34.887Z``) or an epoch number to epoch nanoseconds. Numbers are taken
    as seconds, milliseconds, microseconds or nanoseconds by their size; 0 and 0001-01-01 (how writers
    say "no time"), not finite or unparsable values are missing (None). A time before 1970 is returned
    as it is (negative): the pipeline's boundary replaces every time out of its range by the observed
    time and says so (``collector.time_replaced``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return epoch_number_to_ns(value)
    if not isinstance(value, str) or not value:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if dt.year == 1:  # 0001-01-01: Go's zero time, a writer's "no time"
            return None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        seconds = int(dt.timestamp())
    except (ValueError, OverflowError, OSError):
        return None
    ns = seconds * 1_000_000_000 + dt.microsecond * 1000
    return ns or None


class HookEnvelope:
    """A spool line ``{ts, agent, event, payload}`` as written by our hook, plugin or ingest server."""

    __slots__ = ("event", "payload", "time_ns")

    def __init__(self, record: RawRecord) -> None:
        data = record.data
        self.event = str(data.get("event") or "")
        payload = data.get("payload")
        self.payload: dict[str, Any] = payload if isinstance(payload, dict) else {}
        if not self.event:
            self.event = str(self.payload.get("hook_event_name") or "")
        self.time_ns = iso_to_ns(data.get("ts")) or record.observed_ns

    def get(self, key: str, default: Any = None) -> Any:
        return self.payload.get(key, default)


def hook_entry(
    record: RawRecord,
    hook: HookEnvelope,
    name: str,
    session_id: str | None,
    native_id: str | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> AgentActivityEntry:
    """An entry from a hook. Its id comes from a native id when the event has one (so the same fact read
    from a transcript dedupes against it), else from the payload and the hook's time: an agent may send
    the very same payload twice (Codex's SessionEnd of two processes of one session), and a replay of the
    same spool line keeps its time, so it still dedupes."""
    key = native_id if native_id is not None else hook_call_key(hook.payload, hook.time_ns)
    attrs: dict[str, Any] = {"source.kind": record.kind, "agent.hook_event_name": hook.event}
    cwd = hook.get("cwd")
    if isinstance(cwd, str):
        attrs["workspace.path"] = cwd
    attrs.update(attributes or {})
    return AgentActivityEntry(
        name=name,
        agent=record.agent,
        time_ns=hook.time_ns,
        observed_ns=record.observed_ns,
        id=event_id(record.agent, session_id, name, key),
        session_id=session_id,
        attributes=attrs,
    )


def native_entry(
    record: RawRecord,
    name: str,
    time_ns: int | None,
    session_id: str | None,
    native_id: str,
    attributes: Mapping[str, Any],
) -> AgentActivityEntry:
    """An entry from the agent's own data (transcript, database row), identified by a native id."""
    attrs = {"source.kind": record.kind}
    attrs.update(attributes)
    return AgentActivityEntry(
        name=name,
        agent=record.agent,
        time_ns=time_ns or record.observed_ns,
        observed_ns=record.observed_ns,
        id=event_id(record.agent, session_id, name, native_id),
        session_id=session_id,
        attributes=attrs,
    )


def unreadable(record: RawRecord, reason: str) -> AgentActivityEntry:
    """What a parser returns, beside what it could read, for a part of ``record`` it had to leave out
    (a field of the wrong type, say): the pipeline counts it per agent and ``reason`` (``status``
    shows it) and exports nothing for it. ``reason`` names the shape, never the content."""
    return AgentActivityEntry(name=UNREADABLE, agent=record.agent, time_ns=record.observed_ns,
                              observed_ns=record.observed_ns, id="", attributes={"reason": reason})


def wrong_types(record: RawRecord, data: Mapping[str, Any], expected: Mapping[str, type | tuple[type, ...]],
                where: str = "") -> list[AgentActivityEntry]:
    """An :func:`unreadable` marker for each field of ``data`` that is present (not null) with another
    type than ``expected`` names (``where``: what ``data`` is, for the reason), so that a record a parser
    must drop for a wrong-typed id or kind is counted with its cause, not lost silently. A boolean is
    never a number here (it is one in Python)."""
    out = []
    for name, kinds in expected.items():
        value = data.get(name)
        allowed = kinds if isinstance(kinds, tuple) else (kinds,)
        if value is None or isinstance(value, allowed) and (bool in allowed or not isinstance(value, bool)):
            continue
        wanted = " or ".join(dict.fromkeys(KIND_NAMES.get(k, k.__name__) for k in allowed))
        out.append(unreadable(record, f"{where}{name} is {json_type(value)}, not {wanted}"))
    return out


def text_message(role: str, text: str) -> list[dict[str, Any]]:
    """OpenTelemetry GenAI message list with one text part."""
    return [{"role": role, "parts": [{"type": "text", "content": text}]}]


def usage_attributes(
    input_tokens: int | None,
    output_tokens: int | None,
    cache_read: int | None = None,
    cache_creation: int | None = None,
    reasoning: int | None = None,
) -> dict[str, Any]:
    """Token attributes; ``input_tokens`` must already include cached tokens (OTel semantics)."""
    attrs: dict[str, Any] = {}
    if input_tokens is not None:
        attrs["gen_ai.usage.input_tokens"] = input_tokens
    if output_tokens is not None:
        attrs["gen_ai.usage.output_tokens"] = output_tokens
    if cache_read is not None:
        attrs["gen_ai.usage.cache_read.input_tokens"] = cache_read
    if cache_creation is not None:
        attrs["gen_ai.usage.cache_creation.input_tokens"] = cache_creation
    if reasoning is not None:
        attrs["gen_ai.usage.reasoning_tokens"] = reasoning
    if input_tokens is not None and output_tokens is not None and _count(input_tokens) and _count(output_tokens):
        attrs["gen_ai.usage.total_tokens"] = input_tokens + output_tokens  # none of a negative count
    return attrs


def _count(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def usage_excluding_cache(fresh: int | None, output: int | None, cache_read: int | None,
                          cache_write: int | None, reasoning: int | None = None) -> dict[str, Any]:
    """Token attributes from usage whose input count leaves the cache out (Anthropic's ``input_tokens``,
    pi's ``input``): the input is the fresh tokens plus the cache reads and writes."""
    read, write = cache_read or 0, cache_write or 0
    if fresh is not None and not (_count(fresh) and _count(read) and _count(write)):
        # a negative (or not numeric) part is not summed away into a plausible input: passed on as it is,
        # the boundary refuses it and names it in collector.invalid_fields
        return usage_attributes(fresh, output, cache_read, cache_write, reasoning)
    return usage_attributes(None if fresh is None else fresh + read + write, output, read, write, reasoning)


def chat_response(model: Any, response_id: Any, finish_reason: Any, requested_model: Any = None) -> dict[str, Any]:
    """The attributes every ``llm.response`` of a chat model call has (None where the agent says nothing)."""
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": requested_model or model,
        "gen_ai.response.model": model,
        "gen_ai.response.id": response_id,
        "gen_ai.response.finish_reasons": [finish_reason] if isinstance(finish_reason, str) and finish_reason
        else None,
    }


def json_or_value(value: Any) -> Any:
    """A string that holds JSON (tool arguments, a serialised model request), decoded; any other value,
    or a string that is not JSON, as it is."""
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


Parser = Callable[[RawRecord], list[AgentActivityEntry]]  # what every agent module's ``parse`` is

HookHandler = Callable[[RawRecord, HookEnvelope, "str | None"], list[AgentActivityEntry]]


def hook_session(hook: HookEnvelope, fields: tuple[str, ...] = ("session_id",)) -> str | None:
    """The session id a hook payload carries, under the first of ``fields`` that holds a string."""
    for name in fields:
        value = hook.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def dispatch_hook(record: RawRecord, handlers: Mapping[str, HookHandler],
                  session_fields: tuple[str, ...] = ("session_id",)) -> list[AgentActivityEntry]:
    """Parse a hook record with the handler its event name selects; events without one give nothing."""
    hook = HookEnvelope(record)
    handler = handlers.get(hook.event)
    if handler is None:
        return []
    return handler(record, hook, hook_session(hook, session_fields))


def no_entry(record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
    """A hook that makes no entry of its own (Stop, Notification, ...): the status tracker reads the raw
    hook, and the agent's own files describe the rest."""
    return []
