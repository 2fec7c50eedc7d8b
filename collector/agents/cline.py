"""Cline CLI (npm ``cline``): its messages files, its sessions database and our hook executables' lines.

Messages: ``~/.cline/data/sessions/<session id>/<session id>.messages.json`` is one JSON document
``{version, agent, sessionId, origin, messages: [...], system_prompt}`` that Cline rewrites whole after
every message; the source yields its ``messages`` one element at a time (``json_item`` records:
``{item, index, document}``). A sub-agent writes ``agent_<agent id>.messages.json`` into its parent's
folder (``agent: "subagent"``): its entries belong to the parent session, with
``gen_ai.agent.scope: subagent`` and ``gen_ai.agent.id`` (its first message, the task it was given, is its
``subagent.start``, not a prompt).

- ``user`` with text: user.prompt, turn id = the message id (Cline wraps the text in ``<user_input>``).
- ``user`` with ``tool_result`` blocks: tool.result per block (``tool_use_id``). ``run_commands`` gives one
  result per command, ``{query, result, success, error?}``; a command exiting non-zero is
  ``success: false`` with ``error: "Command exited with code N"``.
- ``assistant``: llm.response (id = Cline's message id: the provider's response id is not kept), with
  ``metrics`` ``{inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens}``; ``inputTokens`` already
  includes the cache reads (checked against an OpenAI-compatible provider). A tool.call per ``tool_use``
  block; ``spawn_agent`` is an agent-type call (the sub-agent it starts is tied to it by time).

Sessions database (``~/.cline/data/db/sessions.db``, table ``sessions``, one row per session and per
sub-agent, updated in place): session.start / session.end (``status``, ``exit_code``) and, for a
sub-agent row (``is_subagent``), subagent.start / subagent.end in the parent session. The session.end
carries ``agent.hook_event_name: db.session_ended``, which the definition's status rules map to ``end``:
no hook fires when a headless ``cline`` exits, so this is what closes the session's live status.

Hooks (our wrapper per event in ``~/.cline/hooks``; payload ``{taskId, sessionContext: {rootSessionId},
agent_id, parent_agent_id, hookName, ...}``) carry no prompt id, and PreToolUse fires before the messages
file names the prompt, so tool entries made from them would have no turn: the files make those, and the
hooks give the main agent's session.start (TaskStart, same id as the database's; TaskResume), errors
(TaskError) and session.end (SessionShutdown), and drive the live status. Hooks of a sub-agent
(``parent_agent_id`` set) make no entry.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

from collector.agents.common import (
    HookEnvelope,
    as_int,
    hook_entry,
    iso_to_ns,
    json_type,
    native_entry,
    text_message,
    unreadable,
    usage_attributes,
    wrong_types,
)
from collector.model import AgentActivityEntry, RawRecord

_EXIT_CODE = re.compile(r"exited with code (-?\d+)")
_USER_INPUT = re.compile(r"^\s*<user_input[^>]*>(.*)</user_input>\s*$", re.DOTALL)
_SUBAGENT_FILE = re.compile(r"^(agent_[A-Za-z0-9_-]+)\.messages\.json$")
AGENT_TOOLS = {"spawn_agent"}
# A session row that ended drives the live status as a hook would (the definition maps it to "end"):
# no hook fires when a headless `cline` exits.
_ENDED = {"agent.hook_event_name": "db.session_ended"}


def parse(record: RawRecord) -> list[AgentActivityEntry]:
    if record.kind == "json_item":
        return _parse_item(record)
    if record.kind == "sqlite":
        return _parse_row(record)
    if record.kind == "hook":
        return _parse_hook(record)
    return []


# --------------------------------------------------------------------------------------- messages file


def _parse_item(record: RawRecord) -> list[AgentActivityEntry]:
    message = record.data.get("item")
    path = PurePath(str(record.meta.get("path") or ""))
    session = path.parent.name or None
    if not isinstance(message, dict) or not session:
        return [] if message is None or not session else [
            unreadable(record, f"message is {json_type(message)}, not an object")]
    sub = _SUBAGENT_FILE.match(path.name)
    agent_id = sub.group(1) if sub else None
    if agent_id and record.data.get("index") == 0 and message.get("role") == "user":
        attrs = _scope(agent_id)
        return [native_entry(record, "subagent.start", iso_to_ns(message.get("ts")), session, agent_id, attrs)]
    entries = _message(record, message, session)
    if agent_id:
        for entry in entries:
            entry.attributes.update(_scope(agent_id))
    return entries


def _scope(agent_id: str) -> dict[str, Any]:
    return {"gen_ai.agent.scope": "subagent", "gen_ai.agent.id": agent_id}


def _message(record: RawRecord, message: dict[str, Any], session: str) -> list[AgentActivityEntry]:
    role, content = message.get("role"), message.get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    if role == "assistant":
        return _assistant(record, message, blocks, session)
    if role != "user":
        return wrong_types(record, message, {"role": str}, "message ")
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if results:
        time_ns = iso_to_ns(message.get("ts"))
        return [e for b in results for e in _file_result(record, b, time_ns, session)]
    return _prompt(record, message, blocks, session)


def _prompt(record: RawRecord, message: dict[str, Any], blocks: list[dict[str, Any]],
            session: str) -> list[AgentActivityEntry]:
    message_id = message.get("id")
    if not isinstance(message_id, str) or not message_id:
        return wrong_types(record, message, {"id": str}, "message ")
    text = "\n".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
    match = _USER_INPUT.match(text)
    text = match.group(1) if match else text
    attrs = {"gen_ai.turn.id": message_id, "gen_ai.input.messages": text_message("user", text) if text else None}
    return [native_entry(record, "user.prompt", iso_to_ns(message.get("ts")), session, message_id, attrs)]


def _assistant(record: RawRecord, message: dict[str, Any], blocks: list[dict[str, Any]],
               session: str) -> list[AgentActivityEntry]:
    message_id = message.get("id")
    if not isinstance(message_id, str) or not message_id:
        return wrong_types(record, message, {"id": str}, "message ")
    time_ns = iso_to_ns(message.get("ts"))
    entries = [native_entry(record, "llm.response", time_ns, session, message_id, _response_attrs(message, blocks))]
    for block in blocks:
        call_id = block.get("id")
        if block.get("type") == "tool_use" and isinstance(call_id, str) and call_id:
            attrs = _call_attrs(call_id, block.get("name"), block.get("input"))
            entries.append(native_entry(record, "tool.call", time_ns, session, call_id, attrs))
    return entries


def _response_attrs(message: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, Any]:
    metrics = _obj(message.get("metrics"))
    model = _obj(message.get("modelInfo"))
    text = "\n".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
    cost = metrics.get("cost")
    return {
        "gen_ai.provider.name": model.get("provider"),
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model.get("id"),
        "gen_ai.response.model": model.get("id"),
        "gen_ai.output.messages": text_message("assistant", text) if text else None,
        "gen_ai.usage.cost_usd": cost if type(cost) in (int, float) else None,
        **usage_attributes(as_int(metrics.get("inputTokens")), as_int(metrics.get("outputTokens")),
                           as_int(metrics.get("cacheReadTokens")), as_int(metrics.get("cacheWriteTokens"))),
    }


def _call_attrs(call_id: str, name: Any, arguments: Any) -> dict[str, Any]:
    attrs = {"gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id, "gen_ai.tool.call.arguments": arguments}
    if name in AGENT_TOOLS:
        attrs["gen_ai.tool.type"] = "agent"
    return attrs


def _file_result(record: RawRecord, block: dict[str, Any], time_ns: int | None,
                 session: str) -> list[AgentActivityEntry]:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        return []
    attrs = _result_attrs(call_id, block.get("name"), block.get("content"), block.get("is_error") is True)
    return [native_entry(record, "tool.result", time_ns, session, call_id, attrs)]


def _result_attrs(call_id: str, name: Any, output: Any, is_error: bool) -> dict[str, Any]:
    """A result: Cline's tools give a string, a list of per-item results ``{result, success, error}``
    (run_commands, read_files) or an object (spawn_agent)."""
    items = [i for i in output if isinstance(i, dict)] if isinstance(output, list) else []
    errors = [str(i.get("error") or i.get("result") or "") for i in items if i.get("success") is False]
    codes = [int(m.group(1)) for e in errors if (m := _EXIT_CODE.search(e))]
    exit_code = next((c for c in codes if c != 0), None)
    failed = is_error or bool(errors)
    attrs: dict[str, Any] = {"gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id,
                             "tool.result.status": "error" if failed else "success", "process.exit.code": exit_code}
    if failed:
        attrs["error.type"] = "exit_code" if exit_code is not None else "tool_error"
        attrs["error.message"] = "\n".join(errors) or _text(output) or None
    else:
        attrs["gen_ai.tool.call.result"] = _text(output)
    return attrs


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    items = [i for i in value if isinstance(i, dict)] if isinstance(value, list) else []
    if items and all(isinstance(i.get("result"), str) for i in items):
        return "\n".join(i["result"] for i in items)
    if items and all(isinstance(i.get("text"), str) for i in items):
        return "\n".join(i["text"] for i in items)
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return str(value["text"])
    return "" if value is None else str(value)


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# ------------------------------------------------------------------------------------ sessions database


def _parse_row(record: RawRecord) -> list[AgentActivityEntry]:
    row = record.data.get("row")
    if record.data.get("table") != "sessions" or not isinstance(row, dict):
        return []
    session, agent_id = row.get("session_id"), row.get("agent_id")
    if not isinstance(session, str) or not session:
        return []
    if row.get("is_subagent") and isinstance(agent_id, str) and agent_id:
        parent = row.get("parent_session_id")
        return _row_span(record, row, parent if isinstance(parent, str) else None, "subagent", agent_id,
                         _scope(agent_id))
    attrs = {"session.source": "startup", "workspace.path": row.get("cwd"),
             "gen_ai.request.model": row.get("model"), "gen_ai.provider.name": row.get("provider")}
    return _row_span(record, row, session, "session", "start", attrs)


def _row_span(record: RawRecord, row: dict[str, Any], session: str | None, kind: str, native: str,
              attrs: dict[str, Any]) -> list[AgentActivityEntry]:
    if session is None:
        return []
    start = iso_to_ns(row.get("started_at"))
    entries = [native_entry(record, f"{kind}.start", start, session, native, attrs)] if start else []
    ended = row.get("ended_at")
    end = iso_to_ns(ended)
    if end and row.get("status") != "running":
        end_native = native if kind == "subagent" else f"end:{ended}"
        end_attrs = {**(_ENDED if kind == "session" else attrs), "session.reason": row.get("status"),
                     "process.exit.code": as_int(row.get("exit_code"))}
        entries.append(native_entry(record, f"{kind}.end", end, session, end_native, end_attrs))
    return entries


# ---------------------------------------------------------------------------------------------- hooks


def _parse_hook(record: RawRecord) -> list[AgentActivityEntry]:
    hook = HookEnvelope(record)
    context = _obj(hook.get("sessionContext"))
    session = context.get("rootSessionId")
    if not isinstance(session, str) or not session:
        return []
    agent_id, parent = hook.get("agent_id"), hook.get("parent_agent_id")
    scope = _scope(agent_id) if isinstance(parent, str) and parent and isinstance(agent_id, str) else {}
    entries = _hook_entries(record, hook, session, scope)
    workspace = _obj(hook.get("workspaceInfo")).get("rootPath")
    for entry in entries:
        entry.attributes.update(scope)
        if isinstance(workspace, str) and workspace:
            entry.attributes.setdefault("workspace.path", workspace)
    return entries


def _hook_entries(record: RawRecord, hook: HookEnvelope, session: str,
                  scope: dict[str, Any]) -> list[AgentActivityEntry]:
    """Hooks carry no prompt id, and a tool hook fires before the messages file names the prompt: tool
    calls, results and sub-agents come from the files (in their turn); hooks give the main agent's starts,
    errors and shutdown (and the live status, from the raw hook)."""
    event = hook.event
    if scope:
        return []
    if event in ("TaskStart", "TaskResume"):
        resumed = event == "TaskResume"
        return [hook_entry(record, hook, "session.start", session, None if resumed else "start",
                           {"session.source": "resume" if resumed else "startup"})]
    if event == "TaskError":
        error = _obj(hook.get("error"))
        return [hook_entry(record, hook, "error", session, attributes={
            "error.type": str(error.get("name") or "agent_error"), "error.message": error.get("message")})]
    if event == "SessionShutdown":
        return [hook_entry(record, hook, "session.end", session, attributes={"session.reason": hook.get("reason")})]
    return []
