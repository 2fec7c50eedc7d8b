"""Claude Code's own OpenTelemetry (``CLAUDE_CODE_ENABLE_TELEMETRY=1``): its log events, as the OTLP
receiver's ``otel_log`` records (docs/otlp-receiver.md).

Only ``claude_code.api_request`` makes an entry: one ``llm.response`` per model call with the exact usage
Claude Code reports (``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_creation_tokens``,
``cost_usd``, ``duration_ms``, ``model``, ``request_id``; ``session.id`` and ``prompt.id`` common to every
event; Claude Code's monitoring docs, https://code.claude.com/docs/en/monitoring-usage). The event names
no message id, so its entry cannot be given the transcript's id of the same call; it carries the keys the
pipeline's merge (collector.pipeline.merge, docs/merge.md) pairs it by instead: the request id, and the
call's input-side signature. Other events (user prompts, tool results, API errors) are what the hooks and
the transcript already make, with ids the telemetry lacks: they make nothing here. An ``api_request``
that could pair by neither (no ``request_id``; ``session.id`` or ``model`` absent or not a string) makes no
entry but a counted marker: delivered, it would count the transcript's call a second time.
"""

from __future__ import annotations

from typing import Any

from collector.agents.common import as_int, iso_to_ns, native_entry, unreadable, usage_excluding_cache, wrong_types
from collector.model import AgentActivityEntry, RawRecord

PREFIX = "claude_code."
# what pairs the call with its transcript line (signature; Claude Code sends both with every api_request):
# absent or wrong-typed, with no request id, the call would be delivered twice (once from the transcript)
_PAIRING_TYPES = {"session.id": str, "model": str}
CALL_KEYS = "collector.call_keys"  # the merge's pairing keys; removed by the merge, never exported


def parse_log(record: RawRecord) -> list[AgentActivityEntry]:
    log = record.data.get("log")
    if not isinstance(log, dict):
        return []
    attrs = log.get("attributes")
    attrs = attrs if isinstance(attrs, dict) else {}
    if event_name(log, attrs) != "api_request":
        return []
    unpairable = wrong_types(record, attrs, _PAIRING_TYPES, "api_request") + [
        unreadable(record, f"api_request has no {name}") for name in _PAIRING_TYPES if attrs.get(name) is None]
    if unpairable and not isinstance(attrs.get("request_id"), str):
        return unpairable  # counted with its cause; the transcript's line of the call still makes it
    return [_api_request(record, log, attrs), *unpairable]


def event_name(log: dict[str, Any], attrs: dict[str, Any]) -> str | None:
    """Claude Code names an event in the ``event.name`` attribute and the body (``claude_code.<name>``);
    an SDK that fills the log record's own ``event_name`` is taken too."""
    for value in (log.get("event_name"), attrs.get("event.name"), log.get("body")):
        if isinstance(value, str) and value:
            return value.removeprefix(PREFIX)
    return None


def signature(session: Any, model: Any, fresh: Any, cache_read: Any, cache_write: Any) -> str | None:
    """A model call's input side (session, model, fresh input, cache reads and writes): what the
    transcript's line and the telemetry both know exactly before the answer streams."""
    parts = (session, model, count(fresh), count(cache_read), count(cache_write))
    if any(p is None for p in parts):
        return None
    return "sig:" + "|".join(str(p) for p in parts)


def count(value: Any) -> int | None:
    """A token count as an integer or its decimal text (OTLP attributes carry either), else None."""
    if isinstance(value, str) and value.isdigit() and len(value) <= 18:
        return int(value)
    return as_int(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if value >= 0 else None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if number >= 0 and number == number and number != float("inf") else None
    return None


def _api_request(record: RawRecord, log: dict[str, Any], attrs: dict[str, Any]) -> AgentActivityEntry:
    session = attrs.get("session.id") if isinstance(attrs.get("session.id"), str) else None
    model = attrs.get("model") if isinstance(attrs.get("model"), str) else None
    request_id = attrs.get("request_id") if isinstance(attrs.get("request_id"), str) else None
    fresh, read, write = (count(attrs.get(k)) for k in ("input_tokens", "cache_read_tokens",
                                                             "cache_creation_tokens"))
    keys = [f"req:{request_id}"] if request_id else []
    sig = signature(session, model, fresh, read, write)
    if sig:
        keys.append(sig)
    duration = _number(attrs.get("duration_ms"))
    out: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.response.model": model,
        "gen_ai.turn.id": attrs.get("prompt.id") if isinstance(attrs.get("prompt.id"), str) else None,
        "gen_ai.usage.cost_usd": _number(attrs.get("cost_usd")),
        "duration_ms": int(duration) if duration is not None else None,
        CALL_KEYS: keys or None,
    }
    out.update(usage_excluding_cache(fresh if fresh is not None else 0, count(attrs.get("output_tokens")),
                                     read, write))
    if attrs.get("query_source") == "subagent":
        out["gen_ai.agent.scope"] = "subagent"
    time_ns = iso_to_ns(attrs.get("event.timestamp")) or count(log.get("time_unix_nano"))
    request, index = record.data.get("request"), record.data.get("index")
    spooled = f"{request}:{index}" if isinstance(request, str) else record.position  # the receiver's, or a file's
    native = f"otel:{request_id}" if request_id else f"otel:{spooled}"
    return native_entry(record, "llm.response", time_ns, session, native, out)
