"""Codex's own OpenTelemetry (``[otel]`` in ``config.toml``, switched on by ``install --telemetry``): its
log events, as the OTLP receiver's ``otel_log`` records (docs/otlp-receiver.md).

Only a ``codex.sse_event`` of ``event.kind`` ``response.completed`` that carries token counts makes an
entry: one ``llm.response`` per model response with the usage Codex read from the API's
``response.completed`` (``input_token_count``, which includes the cached tokens as in OpenAI's usage,
``output_token_count``, ``cached_token_count``, ``cache_write_token_count``, ``reasoning_token_count``;
``conversation.id`` the thread id, ``model``; as Codex 0.171.0 sends them, tests/fixtures/codex-telemetry).
Codex logs each ``response.completed`` twice, once without counts (every SSE event's generic line): that
one makes nothing. The event names no response id, so the entry carries the call's input-side signature
the rollout's ``token_usage_record`` of the same response carries too (collector.agents.codex), which the
pipeline's merge pairs them by (docs/merge.md). Other events (prompts, tool decisions and results, API
requests) are what the hooks and the rollout already make: they make nothing here, nor do spans and
metrics.
"""

from __future__ import annotations

from typing import Any

from collector.agents.claude_otel import CALL_KEYS, count, signature
from collector.agents.common import iso_to_ns, native_entry, usage_attributes
from collector.model import AgentActivityEntry, RawRecord

OTEL_KINDS = frozenset({"otel_log", "otel_span", "otel_metric"})


def parse_otel(record: RawRecord) -> list[AgentActivityEntry]:
    if record.kind != "otel_log":
        return []
    log = record.data.get("log")
    attrs = log.get("attributes") if isinstance(log, dict) else None
    if not isinstance(log, dict) or not isinstance(attrs, dict):
        return []
    if attrs.get("event.name") != "codex.sse_event" or attrs.get("event.kind") != "response.completed":
        return []
    if count(attrs.get("input_token_count")) is None or count(attrs.get("output_token_count")) is None:
        return []  # the generic line of the same SSE event
    return [_completed(record, log, attrs)]


def call_signature(session: Any, model: Any, total_input: Any, cached: Any, cache_write: Any) -> str | None:
    """The call's input side as the merge's key, from OpenAI-style counts (input includes the cached)."""
    total, read, write = count(total_input), count(cached) or 0, count(cache_write) or 0
    if total is None or read > total:
        return None
    return signature(session, model, total - read, read, write)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _completed(record: RawRecord, log: dict[str, Any], attrs: dict[str, Any]) -> AgentActivityEntry:
    session, model = _text(attrs.get("conversation.id")), _text(attrs.get("model"))
    total, cached = attrs.get("input_token_count"), attrs.get("cached_token_count")
    write = attrs.get("cache_write_token_count")
    sig = call_signature(session, model, total, cached, write)
    out: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,  # what Codex asked for, as its rollout names it
        CALL_KEYS: [sig] if sig else None,
        **usage_attributes(count(total), count(attrs.get("output_token_count")), count(cached) or 0,
                           count(write) or 0, count(attrs.get("reasoning_token_count"))),
    }
    time_ns = iso_to_ns(attrs.get("event.timestamp")) or count(log.get("time_unix_nano"))
    request, index = record.data.get("request"), record.data.get("index")
    spooled = f"{request}:{index}" if isinstance(request, str) else record.position
    return native_entry(record, "llm.response", time_ns, session, f"otel:{spooled}", out)
