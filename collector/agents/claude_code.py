"""Claude Code: hook payloads (spool or HTTP) and transcript lines (~/.claude/projects/*/*.jsonl).

Hooks and the transcript describe the same prompts and tool calls; entries for those carry ids made
from Claude's own ids (prompt id, tool_use_id, message id), so whichever arrives second is a duplicate
and is dropped by the pipeline. Claude writes one transcript record per content block, each repeating
the whole API message's usage: the llm.response id is the message id, so each API message counts once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from collector.agents.claude_otel import CALL_KEYS, parse_log, signature
from collector.agents.common import HookEnvelope, as_int, iso_to_ns, native_entry, text_message, usage_excluding_cache
from collector.agents.families.claude_hooks import Dialect, HookProtocol
from collector.model import AgentActivityEntry, RawRecord

OTEL_KINDS = frozenset({"otel_log", "otel_span", "otel_metric"})  # spans and metrics make nothing (claude_otel)


def parse(record: RawRecord) -> list[AgentActivityEntry]:
    if record.kind == "otel_log":
        return parse_log(record)
    if record.kind in OTEL_KINDS:  # metrics repeat the api_request events' sums; beta spans: not mapped
        return []
    if record.kind == "transcript":
        kind = record.data.get("type")
        handler = _TRANSCRIPT.get(kind) if isinstance(kind, str) else None
        if handler is None:  # most lines (attachments, queue operations, ...) make nothing
            return []
        session = record.data.get("sessionId")
        entries = handler(record, record.data, session if isinstance(session, str) else None)
        cwd = record.data.get("cwd")  # every transcript line names the working directory
        if isinstance(cwd, str) and cwd:
            for entry in entries:
                entry.attributes.setdefault("workspace.path", cwd)
        return entries
    return _parse_hook(record)


# ---------------------------------------------------------------------------------------------- hooks


SUBAGENT_TOOLS = frozenset({"Agent", "Task"})


def _prompt_origin(text: str) -> str:
    """A prompt Claude sends itself when a background task finished is no user's."""
    return "task-notification" if text.startswith("<task-notification>") else "user"


def _subagent_of(response: Any) -> str | None:
    """The subagent a Task/Agent tool started: its result names it."""
    if isinstance(response, dict) and isinstance(response.get("agentId"), str):
        return response["agentId"]
    return None


def _success(hook: HookEnvelope) -> dict[str, Any]:
    response = hook.get("tool_response")
    return {"tool.result.status": "success", "gen_ai.tool.call.result": response,
            "gen_ai.subagent.id": _subagent_of(response)}


# the protocol's origin: every other default of the dialect is Claude Code's way
_HOOKS = HookProtocol(Dialect(success=_success, prompt_origin=_prompt_origin, agent_tools=SUBAGENT_TOOLS))


def _parse_hook(record: RawRecord) -> list[AgentActivityEntry]:
    entries = _HOOKS.parse(record)
    payload = record.data.get("payload")
    agent_id = payload.get("agent_id") if isinstance(payload, dict) else None
    if isinstance(agent_id, str) and agent_id:  # the event happened inside a subagent
        for entry in entries:
            entry.attributes.setdefault("gen_ai.agent.scope", "subagent")
            entry.attributes.setdefault("gen_ai.agent.id", agent_id)
    return entries


# ----------------------------------------------------------------------------------------- transcript


def _scope(data: dict[str, Any]) -> dict[str, Any]:
    if not data.get("isSidechain") and not data.get("agentId"):  # subagent files mark every record
        return {}
    return {"gen_ai.agent.scope": "subagent", "gen_ai.agent.id": data.get("agentId")}


def _user(record: RawRecord, data: dict[str, Any], session: str | None) -> list[AgentActivityEntry]:
    message = data.get("message") or {}
    content = message.get("content")
    time_ns = iso_to_ns(data.get("timestamp"))
    turn = data.get("promptId")
    if isinstance(content, str):
        if data.get("isMeta") or data.get("isCompactSummary"):
            return []
        if data.get("isSidechain"):
            return []  # a subagent's task prompt: part of the parent's tool call, not a user turn
        attrs = {"gen_ai.turn.id": turn, "gen_ai.input.messages": text_message("user", content),
                 "prompt.origin": _origin(data)}
        return [native_entry(record, "user.prompt", time_ns, session, turn or data.get("uuid", ""), attrs)]
    if not isinstance(content, list):
        return []
    entries = []
    texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    for block in results:
        entries.append(_tool_result(record, data, session, block, time_ns))
    if texts and not results and not data.get("isMeta") and not data.get("isSidechain"):
        attrs = {"gen_ai.turn.id": turn, "gen_ai.input.messages": text_message("user", "\n".join(texts)),
                 "prompt.origin": _origin(data)}
        entries.append(native_entry(record, "user.prompt", time_ns, session, turn or data.get("uuid", ""), attrs))
    return entries


def _origin(data: dict[str, Any]) -> str:
    origin = data.get("origin")
    if isinstance(origin, dict) and isinstance(origin.get("kind"), str):
        return origin["kind"]
    return "user"


_STOPPED = "User rejected tool use"  # a tool the user stopped: interrupted (Ctrl-C) or refused


def _tool_result(
    record: RawRecord, data: dict[str, Any], session: str | None, block: dict[str, Any], time_ns: int | None
) -> AgentActivityEntry:
    failed = bool(block.get("is_error"))
    tool_use_id = block.get("tool_use_id")
    result = block.get("content")
    attrs: dict[str, Any] = {
        "gen_ai.turn.id": data.get("promptId"),
        "gen_ai.tool.call.id": tool_use_id,
        "tool.result.status": "error" if failed else "success",
        **_scope(data),
    }
    if failed and data.get("toolUseResult") == _STOPPED:
        attrs.update({"tool.result.status": "cancelled", "error.type": "cancelled"})
        attrs["error.message"] = result if isinstance(result, str) else _STOPPED
    elif failed:
        attrs["error.type"] = "tool_error"
        attrs["error.message"] = result if isinstance(result, str) else None
    else:
        attrs["gen_ai.tool.call.result"] = result
        attrs["gen_ai.subagent.id"] = _subagent_of(data.get("toolUseResult"))
    return native_entry(record, "tool.result", time_ns, session, str(tool_use_id), attrs)


def _assistant(record: RawRecord, data: dict[str, Any], session: str | None) -> list[AgentActivityEntry]:
    message = data.get("message") or {}
    time_ns = iso_to_ns(data.get("timestamp"))
    message_id = message.get("id")
    scope = _scope(data)
    if data.get("isApiErrorMessage") or data.get("error"):
        status = data.get("apiErrorStatus")
        attrs = {
            "error.type": str(data.get("apiErrorType") or data.get("error") or "api_error"),
            "error.message": _texts(message.get("content")),
            "http.response.status_code": int(str(status)) if str(status).isdigit() else None,
            **scope,
        }
        return [native_entry(record, "error", time_ns, session, data.get("uuid", ""), attrs)]
    entries: list[AgentActivityEntry] = []
    if isinstance(message_id, str):
        entries.append(_llm_response(record, data, message, session, time_ns, scope))
    for block in message.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            attrs = {
                "gen_ai.tool.name": block.get("name"),
                "gen_ai.tool.type": "agent" if block.get("name") in SUBAGENT_TOOLS else None,
                "gen_ai.tool.call.id": block.get("id"),
                "gen_ai.tool.call.arguments": block.get("input"),
                "gen_ai.response.id": message_id,
                **scope,
            }
            entries.append(native_entry(record, "tool.call", time_ns, session, str(block.get("id")), attrs))
    return entries


def _llm_response(record: RawRecord, data: dict[str, Any], message: dict[str, Any], session: str | None,
                  time_ns: int | None, scope: dict[str, Any]) -> AgentActivityEntry:
    usage = message.get("usage") or {}
    details = usage.get("output_tokens_details") or {}
    model, stop = message.get("model"), message.get("stop_reason")
    attrs: dict[str, Any] = {  # chat_response's attributes, written out (a backfill makes one per message)
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": data.get("requestedModel") or model,
        "gen_ai.response.model": model,
        "gen_ai.response.id": message.get("id"),
        "gen_ai.response.finish_reasons": [stop] if isinstance(stop, str) and stop else None,
        "gen_ai.request.id": data.get("requestRef"),
        "gen_ai.output.messages": _output_messages(message),
    }
    if scope:
        attrs.update(scope)
    fresh, read, write = (usage.get(k) for k in ("input_tokens", "cache_read_input_tokens",
                                                   "cache_creation_input_tokens"))
    attrs.update(usage_excluding_cache(
        as_int(fresh) or 0,
        as_int(usage.get("output_tokens")),
        as_int(read),
        as_int(write),
        as_int(details.get("thinking_tokens")) if isinstance(details, dict) else None,
    ))
    if "stop_reason" in message and stop is None:  # written while the answer streamed: placeholder usage
        attrs["gen_ai.usage.incomplete"] = True
    keys = [f"req:{data['requestId']}"] if isinstance(data.get("requestId"), str) else []
    sig = signature(session, model, fresh, read, write)
    attrs[CALL_KEYS] = keys + [sig] if sig else keys or None
    return native_entry(record, "llm.response", time_ns, session, str(message.get("id")), attrs)


def _api_request(record: RawRecord, data: dict[str, Any], session: str | None) -> list[AgentActivityEntry]:
    request_id = data.get("id")
    if not isinstance(request_id, str):
        return []
    params = data.get("params") or {}
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": params.get("model"),
        "gen_ai.request.max_tokens": as_int(params.get("max_tokens")),
        "gen_ai.request.id": request_id,
    }
    return [native_entry(record, "llm.request", iso_to_ns(data.get("timestamp")), session, request_id, attrs)]


def _system(record: RawRecord, data: dict[str, Any], session: str | None) -> list[AgentActivityEntry]:
    subtype = data.get("subtype")
    time_ns = iso_to_ns(data.get("timestamp"))
    uid = str(data.get("uuid", ""))
    if subtype == "api_error":
        error = data.get("error") or {}
        message = error.get("message") if isinstance(error, dict) else str(error)
        attrs = {"error.type": "api_error", "error.message": message or data.get("content")}
        return [native_entry(record, "error", time_ns, session, uid, attrs)]
    if subtype == "compact_boundary":
        meta = data.get("compactMetadata") or {}
        attrs = {"compaction.trigger": meta.get("trigger"), "compaction.pre_tokens": as_int(meta.get("preTokens"))}
        return [native_entry(record, "compaction", time_ns, session, uid, attrs)]
    return []


_TRANSCRIPT: dict[Any, Callable[[RawRecord, dict[str, Any], str | None], list[AgentActivityEntry]]] = {
    "assistant": _assistant,
    "user": _user,
    "api-request": _api_request,
    "system": _system,
}


def _texts(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        return "\n".join(parts) if parts else None
    return None


def _output_messages(message: dict[str, Any]) -> list[dict[str, Any]] | None:
    text = _texts(message.get("content"))
    return text_message("assistant", text) if text else None
