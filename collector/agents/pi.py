"""pi (``@mariozechner/pi-coding-agent``) and its fork Oh My Pi (``@oh-my-pi/pi-coding-agent``, same
session format, same extension API): lines of their session files and lines our extension
(``integrations/pi/agent-collector.ts``) appends to the spool.

The session file ``<agent dir>/sessions/--<cwd>--/<timestamp>_<session id>.jsonl`` is a tree of entries
(``{type, id, parentId, timestamp, ...}``) after a ``session`` header (Oh My Pi writes a fixed-width
``title`` slot before it, and ``custom`` entries of its own: neither is of interest); no line but the
header names the session, so the id comes from the file name. ``message`` entries hold pi's messages:

- ``user``: user.prompt. pi gives a prompt no id; its own ``timestamp`` (ms) is the turn id, and the
  extension's ``prompt`` line carries the same message, so both give one entry.
- ``assistant``: llm.response (id: the provider's ``responseId``), one per model call, and a tool.call per
  ``toolCall`` part. pi's ``usage.input`` excludes the cache: input tokens = ``input + cacheRead +
  cacheWrite``. ``usage.cost.total`` is pi's own cost figure (``gen_ai.usage.cost_usd``). A call that
  failed (``stopReason: error``) also gives an ``error`` entry with pi's ``errorMessage``.
- ``toolResult``: tool.result (``isError``; bash appends ``Command exited with code N`` to the output).
- ``compaction`` entries: compaction.

The extension's lines (``{session_id, session_file, cwd, ...}``) give the same prompts, model calls and
tools with the same ids, and what the file does not say: each process's session_start (``--continue``
writes no marker into the file) and session_shutdown (``session.reason: exit``).
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

from collector.agents.common import (
    HookEnvelope,
    as_int,
    chat_response,
    hook_entry,
    iso_to_ns,
    native_entry,
    text_message,
    unreadable,
    usage_excluding_cache,
    wrong_types,
)
from collector.model import AgentActivityEntry, RawRecord
from collector.util.json_kinds import json_type

_EXIT_CODE = re.compile(r"Command exited with code (\d+)\s*$")
_SESSION_NAME = re.compile(r"_([0-9a-fA-F-]{36})\.jsonl$")


def parse(record: RawRecord) -> list[AgentActivityEntry]:
    if record.kind == "hook":
        return _parse_hook(record)
    return _parse_line(record)


# ---------------------------------------------------------------------------------------- session file


def _parse_line(record: RawRecord) -> list[AgentActivityEntry]:
    data = record.data
    kind = data.get("type")
    if kind == "session":
        return _header(record, data)
    session = _file_session(record.meta.get("path"))
    if kind == "message":
        message = data.get("message")
        return _message(record, message, session) if isinstance(message, dict) else []
    if kind == "compaction" and isinstance(data.get("id"), str):
        attrs = {"compaction.tokens_before": as_int(data.get("tokensBefore"))}
        return [native_entry(record, "compaction", iso_to_ns(data.get("timestamp")), session, data["id"], attrs)]
    if kind == "compaction":
        return wrong_types(record, data, {"id": str}, "compaction ")
    return []


def _file_session(path: Any) -> str | None:
    match = _SESSION_NAME.search(PurePath(path).name) if isinstance(path, str) else None
    return match.group(1) if match else None


def _header(record: RawRecord, data: dict[str, Any]) -> list[AgentActivityEntry]:
    session = data.get("id")
    if not isinstance(session, str) or not session:
        return wrong_types(record, data, {"id": str}, "session header ")
    attrs = {"session.source": "fork" if data.get("parentSession") else "startup",
             "workspace.path": data.get("cwd")}
    return [native_entry(record, "session.start", iso_to_ns(data.get("timestamp")), session, "start", attrs)]


def _message(record: RawRecord, message: dict[str, Any], session: str | None) -> list[AgentActivityEntry]:
    role = message.get("role")
    if role == "user":
        return _prompt(record, message, session)
    if role == "assistant":
        return _assistant(record, message, session)
    if role == "toolResult":
        return _tool_result(record, message, session)
    return []


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))


def _prompt(record: RawRecord, message: dict[str, Any], session: str | None) -> list[AgentActivityEntry]:
    stamp = as_int(message.get("timestamp"))
    if stamp is None:  # pi's prompt has no id but its time: without one it cannot be told from another
        value = message.get("timestamp")
        return [] if value is None else [unreadable(record, f"user message timestamp is {json_type(value)}, "
                                                            "not an integer")]
    text = _text(message.get("content"))
    attrs = {"gen_ai.turn.id": str(stamp), "gen_ai.input.messages": text_message("user", text) if text else None}
    return [_entry(record, "user.prompt", stamp, session, f"prompt:{stamp}", attrs)]


def _assistant(record: RawRecord, message: dict[str, Any], session: str | None) -> list[AgentActivityEntry]:
    stamp = as_int(message.get("timestamp"))
    response_id = message.get("responseId")
    native = response_id if isinstance(response_id, str) and response_id else f"response:{stamp}"
    entries = [_entry(record, "llm.response", stamp, session, native, _response_attrs(message))]
    if message.get("stopReason") == "error":
        error = message.get("errorMessage")
        attrs = {"error.type": "api_error", "error.message": error if isinstance(error, str) else None}
        entries.append(_entry(record, "error", stamp, session, native, attrs))
    # pi-ai's assistant message holds a list of parts (text, thinking, toolCall), as every fixture's does
    entries += wrong_types(record, message, {"content": list}, "assistant message ")
    for part in _parts(message):
        if not isinstance(part, dict):  # it may have been a tool call: say so rather than lose it unseen
            entries += wrong_types(record, {"content[]": part}, {"content[]": dict}, "assistant message ")
        elif part.get("type") == "toolCall" and isinstance(part.get("id"), str):
            entries.append(_entry(record, "tool.call", stamp, session, part["id"], {
                "gen_ai.tool.name": part.get("name"), "gen_ai.tool.call.id": part["id"],
                "gen_ai.tool.call.arguments": part.get("arguments")}))
        elif part.get("type") == "toolCall" or not isinstance(part.get("type"), str):
            entries += wrong_types(record, part, {"type": str, "id": str}, "assistant message content[] ")
    return entries


def _parts(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _response_attrs(message: dict[str, Any]) -> dict[str, Any]:
    usage = _obj(message.get("usage"))
    total = _obj(usage.get("cost")).get("total")
    text = _text([p for p in _parts(message) if isinstance(p, dict) and p.get("type") == "text"])
    response_id = message.get("responseId")
    return {
        "gen_ai.provider.name": message.get("provider"),
        **chat_response(message.get("model"), response_id if isinstance(response_id, str) else None,
                        message.get("stopReason")),
        "gen_ai.output.messages": text_message("assistant", text) if text else None,
        "gen_ai.usage.cost_usd": total if type(total) in (int, float) else None,
        **usage_excluding_cache(as_int(usage.get("input")), as_int(usage.get("output")),
                                as_int(usage.get("cacheRead")), as_int(usage.get("cacheWrite"))),
    }


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _tool_result(record: RawRecord, message: dict[str, Any], session: str | None) -> list[AgentActivityEntry]:
    call_id = message.get("toolCallId")
    if not isinstance(call_id, str) or not call_id:
        return wrong_types(record, message, {"toolCallId": str}, "tool result ")
    attrs = _result_attrs(call_id, message.get("toolName"), message.get("content"), message.get("isError"))
    return [_entry(record, "tool.result", as_int(message.get("timestamp")), session, call_id, attrs)]


def _result_attrs(call_id: str, tool: Any, content: Any, is_error: Any) -> dict[str, Any]:
    output = _text(content)
    match = _EXIT_CODE.search(output)
    exit_code = int(match.group(1)) if match else None
    failed = is_error is True or exit_code not in (None, 0)
    attrs: dict[str, Any] = {"gen_ai.tool.name": tool, "gen_ai.tool.call.id": call_id,
                             "tool.result.status": "error" if failed else "success", "process.exit.code": exit_code}
    if failed:
        attrs["error.type"] = "exit_code" if exit_code not in (None, 0) else "tool_error"
        attrs["error.message"] = output or None
    else:
        attrs["gen_ai.tool.call.result"] = output
    return attrs


def _entry(record: RawRecord, name: str, stamp_ms: int | None, session: str | None, native: str,
           attrs: dict[str, Any]) -> AgentActivityEntry:
    entry = native_entry(record, name, iso_to_ns(stamp_ms), session, native, attrs)
    if record.kind == "hook":
        entry.attributes["agent.hook_event_name"] = str(record.data.get("event") or "")
    return entry


# ------------------------------------------------------------------------------------------ extension


def _parse_hook(record: RawRecord) -> list[AgentActivityEntry]:
    hook = HookEnvelope(record)
    session = hook.get("session_id")
    session = session if isinstance(session, str) and session else None
    message = hook.get("message")
    if hook.event == "prompt" and isinstance(message, dict):
        return _prompt(record, message, session)
    if hook.event == "turn_end" and isinstance(message, dict):
        return _assistant(record, message, session)
    if hook.event == "tool_call":
        return _hook_tool_call(record, hook, session)
    if hook.event == "tool_result" and isinstance(hook.get("toolCallId"), str):
        call_id = hook.get("toolCallId")
        attrs = _result_attrs(call_id, hook.get("toolName"), hook.get("content"), hook.get("isError"))
        return [hook_entry(record, hook, "tool.result", session, call_id, attrs)]
    if hook.event == "tool_result":
        return wrong_types(record, hook.payload, {"toolCallId": str}, "tool_result ")
    if hook.event == "session_start":
        return _hook_start(record, hook, session)
    if hook.event == "session_shutdown" and hook.get("reason") != "reload":
        # pi says ``quit``; Oh My Pi gives no reason at all: both are the process ending
        reason = "exit" if hook.get("reason") in ("quit", None) else hook.get("reason")
        return [hook_entry(record, hook, "session.end", session, attributes={"session.reason": reason})]
    if hook.event == "session_compact":
        return [hook_entry(record, hook, "compaction", session)]
    return []


def _hook_tool_call(record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
    call_id = hook.get("toolCallId")
    if not isinstance(call_id, str) or not call_id:
        return wrong_types(record, hook.payload, {"toolCallId": str}, "tool_call ")
    attrs = {"gen_ai.tool.name": hook.get("toolName"), "gen_ai.tool.call.id": call_id,
             "gen_ai.tool.call.arguments": hook.get("input")}
    return [hook_entry(record, hook, "tool.call", session, call_id, attrs)]


def _hook_start(record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
    """A fresh session's start is the header's (same id); a process taking a session up again (``pi
    --continue``, /resume: the session already holds messages) is a start of its own, at its time."""
    reason = hook.get("reason")
    if reason == "reload":
        return []
    resumed = hook.get("resumed") is True or reason == "resume"
    attrs = {"session.source": "resume" if resumed else "fork" if reason == "fork" else "startup"}
    return [hook_entry(record, hook, "session.start", session, None if resumed else "start", attrs)]
