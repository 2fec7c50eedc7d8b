"""Gemini CLI: hook payloads (spool) and the chat log ``~/.gemini/tmp/<project>/chats/session-*.jsonl``
(plus the older whole-file ``session-*.json`` checkpoints, read as ``json_file`` documents).

Gemini's hooks carry no native id for a prompt, a model call or a tool call, so nothing a hook reports
could be matched with the chat log. The chat log is therefore authoritative for prompts, model calls
(tokens) and tool calls/results; hooks give the session's start and end, and feed the status tracker.
Hooks describe prompts, model calls and tools only when they name no chat log (``transcript_path``
empty), as a fallback with ids made from the payload.

The chat log is a JSONL patch log: a header line ``{sessionId, projectHash, startTime, ...}`` (written
again when a session is resumed), ``{"$set": ...}`` patches (which replay the history on resume: they
are skipped), and message lines ``{id, timestamp, type: user|gemini|info|error, content, ...}``. A
``gemini`` message is written again when its tool calls are added, with the same id: the llm.response,
tool.call and tool.result ids come from the message and tool call ids, so the repeat dedupes.

- ``PreCompress`` fires before every model call without compressing: it never becomes a compaction.
- A shell command exiting 1 is ``status: "success"`` in Gemini; the exit code shows only in the
  function response text (``Exit Code: 1``), which makes the tool.result an error here.
- ``tokens.input`` (``promptTokenCount``) includes cached tokens; ``tokens.output`` excludes thoughts,
  which Gemini bills as output, so output = output + thoughts.

Message lines do not carry the session id: it is read once per file from the header (first) line.

Sub-agents (``invoke_agent``) write their own chat log, ``chats/<session id>/<sub-agent id>.jsonl``, whose
header says ``kind: "subagent"`` and carries the sub-agent's id as ``sessionId``. Its entries belong to
the parent session (the folder's name) with ``gen_ai.agent.scope: subagent`` and ``gen_ai.agent.id``;
the header gives ``subagent.start``. The parent's ``invoke_agent`` tool call, written when the sub-agent
has finished, names it (``agentId``): that gives ``subagent.end`` and the link to the call
(``gen_ai.subagent.parent_tool_call.id``). Sub-agent lines look the call up in the parent's chat log
(``collector/agents/gemini_links.py``); lines read while the sub-agent still runs (live, before the parent
wrote the call) carry no link, which ``subagent.end`` then gives.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import orjson

from collector.agents.common import (
    HookEnvelope,
    HookHandler,
    as_int,
    hook_entry,
    hook_session,
    iso_to_ns,
    json_or_value,
    native_entry,
    no_entry,
    payload_digest,
    text_message,
    usage_attributes,
    wrong_types,
)
from collector.agents.families.gemini_chat import (
    exit_code_in,
    function_output,
    object_parts,
    text_of,
    tool_call_attrs,
)
from collector.agents.gemini_links import SubagentFile, subagent_of
from collector.agents.gemini_projects import project_of
from collector.model import AgentActivityEntry, RawRecord
from collector.model.decode import loads

HEADER_BYTES = 64 * 1024
_FINAL = {"success": "success", "error": "error", "cancelled": "cancelled"}


def parse(record: RawRecord) -> list[AgentActivityEntry]:
    if record.kind == "transcript":
        return _in_project(record, _parse_chat_line(record))
    if record.kind == "json_file":
        return _in_project(record, _parse_document(record))
    return _parse_hook(record)


def _in_project(record: RawRecord, entries: list[AgentActivityEntry]) -> list[AgentActivityEntry]:
    """A chat log's entries get the working directory Gemini's project index gives its folder."""
    if entries:
        project = project_of(str(record.meta.get("path", "")))
        for entry in entries if project else ():
            entry.attributes.setdefault("workspace.path", project)
    return entries


# ---------------------------------------------------------------------------------------------- hooks


def _parse_hook(record: RawRecord) -> list[AgentActivityEntry]:
    hook = HookEnvelope(record)
    handler = _HOOKS.get(hook.event)
    if handler is None:
        return []
    session = hook_session(hook)
    if handler in _CHAT_DESCRIBED and hook.get("transcript_path"):
        return []  # the chat log describes this, with native ids
    return handler(record, hook, session)


def _session_start(record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
    attrs = {"session.source": hook.get("source")}
    return [hook_entry(record, hook, "session.start", session, attributes=attrs)]


def _session_end(record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
    attrs = {"session.reason": hook.get("reason")}
    return [hook_entry(record, hook, "session.end", session, attributes=attrs)]


def _prompt(record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
    turn = "prompt:" + payload_digest(hook.payload)
    prompt = text_message("user", str(hook.get("prompt", "")))
    attrs = {"gen_ai.turn.id": turn, "gen_ai.input.messages": prompt}
    return [hook_entry(record, hook, "user.prompt", session, turn, attrs)]


def _after_model(record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
    response = json_or_value(hook.get("llm_response"))
    usage = response.get("usageMetadata") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return []
    request = json_or_value(hook.get("llm_request"))
    model = request.get("model") if isinstance(request, dict) else None
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model,
             **_usage(usage.get("promptTokenCount"), usage.get("candidatesTokenCount"),
                      usage.get("cachedContentTokenCount"), usage.get("thoughtsTokenCount"))}
    return [hook_entry(record, hook, "llm.response", session, attributes=attrs)]


def _tool_key(hook: HookEnvelope) -> str:
    """BeforeTool and AfterTool share no id; the same tool with the same input pairs them."""
    return "tool:" + payload_digest({"name": hook.get("tool_name"), "input": hook.get("tool_input")})


def _before_tool(record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
    key = _tool_key(hook)
    attrs = {"gen_ai.tool.name": hook.get("tool_name"), "gen_ai.tool.call.id": key,
             "gen_ai.tool.call.arguments": hook.get("tool_input")}
    return [hook_entry(record, hook, "tool.call", session, key, attrs)]


def _after_tool(record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
    key = _tool_key(hook)
    response = hook.get("tool_response")
    content = response.get("llmContent") if isinstance(response, dict) else response
    error = response.get("error") if isinstance(response, dict) else None
    exit_code = exit_code_in(content)
    failed = bool(error) or exit_code not in (None, 0)
    attrs = _result_attrs(key, hook.get("tool_name"), failed, exit_code, content, error)
    return [hook_entry(record, hook, "tool.result", session, key, attrs)]



_HOOKS: dict[str, HookHandler] = {
    "SessionStart": _session_start,
    "SessionEnd": _session_end,
    "BeforeAgent": _prompt,
    "AfterModel": _after_model,
    "BeforeTool": _before_tool,
    "AfterTool": _after_tool,
    "BeforeModel": no_entry,
    "BeforeToolSelection": no_entry,
    "AfterAgent": no_entry,
    "PreCompress": no_entry,
    "Notification": no_entry,
}
_CHAT_DESCRIBED = {_prompt, _after_model, _before_tool, _after_tool}

# ------------------------------------------------------------------------------------------- chat log


def _parse_chat_line(record: RawRecord) -> list[AgentActivityEntry]:
    data = record.data
    path = str(record.meta.get("path", ""))
    sub = subagent_of(path)
    if data.get("kind") == "subagent" and sub:
        return [_subagent_start(record, data, sub)]
    if "$set" in data or "type" not in data:
        return []  # patches replay history; the header starts (or resumes) the log
    if sub:
        return [_in_subagent(e, sub) for e in _message(record, data, sub.session) if e.name != "user.prompt"]
    session = data.get("sessionId") or _header_session(path)
    return _message(record, data, session if isinstance(session, str) else None)


def _in_subagent(entry: AgentActivityEntry, sub: SubagentFile) -> AgentActivityEntry:
    entry.attributes.update({"gen_ai.agent.scope": "subagent", "gen_ai.agent.id": sub.agent_id})
    parent = sub.parent_call()
    if parent:
        entry.attributes["gen_ai.subagent.parent_tool_call.id"] = parent[0]
        entry.attributes["gen_ai.turn.id"] = parent[1]
    return entry


def _subagent_start(record: RawRecord, header: dict[str, Any], sub: SubagentFile) -> AgentActivityEntry:
    parent = sub.parent_call()
    attrs = {"gen_ai.agent.scope": "subagent", "gen_ai.agent.id": sub.agent_id,
             "gen_ai.subagent.parent_tool_call.id": parent[0] if parent else None,
             "gen_ai.turn.id": parent[1] if parent else None}
    start = iso_to_ns(header.get("startTime"))
    return native_entry(record, "subagent.start", start, sub.session, sub.agent_id, attrs)


def _subagent_end(record: RawRecord, call: dict[str, Any], session: str | None,
                  time_ns: int | None) -> list[AgentActivityEntry]:
    """The parent's invoke_agent call, written once the sub-agent finished, names it."""
    agent_id = call.get("agentId")
    if not isinstance(agent_id, str) or not agent_id or _FINAL.get(str(call.get("status"))) is None:
        return []
    display = call.get("resultDisplay")
    attrs = {"gen_ai.agent.scope": "subagent", "gen_ai.agent.id": agent_id,
             "gen_ai.subagent.parent_tool_call.id": call["id"],
             "gen_ai.subagent.type": display.get("agentName") if isinstance(display, dict) else None,
             "session.reason": display.get("terminateReason") if isinstance(display, dict) else None}
    end = iso_to_ns(call.get("timestamp")) or time_ns
    return [native_entry(record, "subagent.end", end, session, agent_id, attrs)]


def _parse_document(record: RawRecord) -> list[AgentActivityEntry]:
    """An older whole-file checkpoint: ``{sessionId, startTime, messages: [...]}``."""
    session = record.data.get("sessionId")
    session = session if isinstance(session, str) else None
    messages = record.data.get("messages")
    entries: list[AgentActivityEntry] = wrong_types(record, record.data, {"messages": list}, "document ")
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict):
            entries.extend(_message(record, message, session))
    return entries


def _message(record: RawRecord, msg: dict[str, Any], session: str | None) -> list[AgentActivityEntry]:
    kind = msg.get("type")
    msg_id = msg.get("id")
    if not isinstance(msg_id, str) or not msg_id or not isinstance(kind, str):
        return wrong_types(record, msg, {"id": str, "type": str}, "message ")
    time_ns = iso_to_ns(msg.get("timestamp"))
    if kind == "user":
        return _user(record, msg, msg_id, session, time_ns)
    if kind == "gemini":
        return _gemini(record, msg, msg_id, session, time_ns)
    if kind == "error":
        attrs = {"error.type": "api_error", "error.message": text_of(msg.get("content"))}
        return [native_entry(record, "error", time_ns, session, msg_id, attrs)]
    return []


def _user(record: RawRecord, msg: dict[str, Any], msg_id: str, session: str | None,
          time_ns: int | None) -> list[AgentActivityEntry]:
    text = text_of(msg.get("content"))
    if not text:  # a function response going back to the model, or content of a shape it never writes
        return _content_faults(record, msg.get("content"))
    if text.startswith("<session_context>"):
        return []  # the context preamble
    attrs = {"gen_ai.turn.id": msg_id, "gen_ai.input.messages": text_message("user", text)}
    return [native_entry(record, "user.prompt", time_ns, session, msg_id, attrs)]


def _gemini(record: RawRecord, msg: dict[str, Any], msg_id: str, session: str | None,
            time_ns: int | None) -> list[AgentActivityEntry]:
    entries: list[AgentActivityEntry] = []
    tokens = msg.get("tokens")
    if isinstance(tokens, dict):
        text = text_of(msg.get("content"))
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": msg.get("model"),
            "gen_ai.response.model": msg.get("model"),
            "gen_ai.response.id": msg_id,
            "gen_ai.output.messages": text_message("assistant", text) if text else None,
            **_usage(tokens.get("input"), tokens.get("output"), tokens.get("cached"), tokens.get("thoughts")),
        }
        entries.append(native_entry(record, "llm.response", time_ns, session, msg_id, attrs))
    else:  # the model call cannot be told from a message without it: counted, the tool calls still read
        entries += wrong_types(record, msg, {"tokens": dict}, "message ")
    calls = msg.get("toolCalls")
    entries += wrong_types(record, msg, {"toolCalls": list}, "message ")
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            entries += wrong_types(record, {"toolCalls[]": call}, {"toolCalls[]": dict}, "message ")
        elif isinstance(call.get("id"), str):
            entries.extend(_tool_call(record, call, msg_id, session, time_ns))
        else:
            entries += wrong_types(record, call, {"id": str}, "tool call ")
    return entries


def _tool_call(record: RawRecord, call: dict[str, Any], msg_id: str, session: str | None,
               time_ns: int | None) -> list[AgentActivityEntry]:
    call_id = call["id"]
    attrs = {**tool_call_attrs(call), "gen_ai.response.id": msg_id,
             "gen_ai.tool.type": "agent" if call.get("agentId") else None}
    entries = [native_entry(record, "tool.call", time_ns, session, call_id, attrs)]
    entries += _subagent_end(record, call, session, time_ns)
    status = _FINAL.get(str(call.get("status")))
    if status is None:
        return entries  # still scheduled or running: the result comes with a later copy of the message
    output, error = _function_response(call.get("result"))
    exit_code = exit_code_in(output)
    failed = status == "error" or bool(error) or exit_code not in (None, 0)
    result = _result_attrs(call_id, call.get("name"), failed, exit_code, output, error)
    if status == "cancelled":
        result.update({"tool.result.status": "cancelled", "error.type": "cancelled"})
    if isinstance(call.get("agentId"), str):
        result["gen_ai.subagent.id"] = call["agentId"]
    end_ns = iso_to_ns(call.get("timestamp"))
    entries.append(native_entry(record, "tool.result", end_ns or time_ns, session, call_id, result))
    return entries


def _function_response(result: Any) -> tuple[Any, Any]:
    """(output, error) of a tool call's ``result`` parts: the first function response that has them."""
    for part in object_parts(result):
        found = function_output(part.get("functionResponse", {}))  # one that is no object raises: quarantined
        if found is not None:
            return found
    return None, None


def _result_attrs(call_id: str, name: Any, failed: bool, exit_code: int | None, output: Any,
                  error: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "tool.result.status": "error" if failed else "success",
        "process.exit.code": exit_code,
    }
    if failed:
        attrs["error.type"] = "exit_code" if exit_code not in (None, 0) else "tool_error"
        message = error if error else output
        attrs["error.message"] = message if isinstance(message, str) else _dumps(message)
    else:
        attrs["gen_ai.tool.call.result"] = output
    return attrs


# -- helpers ---------------------------------------------------------------------------------------------


def _usage(inp: Any, out: Any, cached: Any, thoughts: Any) -> dict[str, Any]:
    output, reasoning = as_int(out), as_int(thoughts)
    if output is not None and reasoning:
        output += reasoning
    return usage_attributes(as_int(inp), output, as_int(cached) or 0, 0, reasoning)


def _content_faults(record: RawRecord, content: Any) -> list[AgentActivityEntry]:
    """Markers for a message ``content`` that is neither text nor a list of parts (objects)."""
    if isinstance(content, list):
        odd = next((p for p in content if not isinstance(p, dict)), None)
        if odd is not None:
            return wrong_types(record, {"content[]": odd}, {"content[]": dict}, "message ")
        return [m for part in content for m in wrong_types(record, part, {"text": str}, "message content ")]
    return wrong_types(record, {"content": content}, {"content": (str, list)}, "message ")


def _dumps(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _header_session(path: str) -> str | None:
    """The session id in a chat log's header line, read once per file (path and inode) and cached."""
    try:
        return _read_header_session(path, os.stat(path).st_ino)
    except (OSError, ValueError):
        return None


@functools.lru_cache(maxsize=1024)
def _read_header_session(path: str, ino: int) -> str:
    """Raises (so that nothing is cached) when the header cannot be read yet."""
    with open(path, "rb") as f:
        header = loads(f.readline(HEADER_BYTES))
    session = header.get("sessionId") if isinstance(header, dict) else None
    if not isinstance(session, str) or not session:
        raise ValueError(f"{path}: no sessionId in the first line")
    return session
