"""OpenCode: lines our plugin (``integrations/opencode/agent-collector.js``) appends to the spool, and rows
of OpenCode's SQLite store (``opencode.db``: ``session``, ``message``, ``part``; JSON in the ``data``
columns), read by the ``sqlite`` source, and ``opencode export <id>`` documents (record kind ``export``,
read by a ``command`` source: the same objects, so the same entries and ids as the rows). Plugin hooks
arrive as ``{input, output}`` under the hook's name (``chat.message``, ``tool.execute.before``); bus
events as the event itself under its type (``message.updated``).

Rows are read again whenever they change (a message gains its tokens when it completes, a tool part goes
pending -> running -> completed), so an entry is made only from a row in its final state, with an id
from OpenCode's own id: a re-read row makes the same entries, which the pipeline drops.

- user.prompt: the plugin's ``chat.message`` (message id and text) and the ``message`` row of the user
  message (same id). The text lives in ``part`` rows that do not say whose they are; the source reads
  the message row with its text parts (``related`` ``text_parts`` in the definition: the parts whose
  ``message_id`` is the row's id), and the prompt's text is their non-synthetic text, as the plugin
  gives it. The row's ``summary.diffs`` (whole patches of the files the turn changed) is not read.
- llm.response: an assistant ``message`` row once it has ``time.completed`` (OpenCode 1.x writes one
  assistant message per model step), or the same object in a ``message.updated`` bus event. Its turn is
  its ``parentID`` (the user message). OpenCode stores input tokens without the cache reads and writes;
  ``gen_ai.usage.input_tokens`` adds them back.
- llm.request: ``chat.params``, once per model call, including the session-title call (``agent:
  "title"``), when the plugin forwards that hook. OpenCode stores no usage for the title call anywhere
  (not in the database, the log, or any plugin hook), so that call can at best be seen as a request.
- tool.call/tool.result: ``tool.execute.before``/``after`` and the ``part`` rows of type ``tool``
  (``callID``). ``tool.execute.after`` does not fire for a tool that throws; its part row (status
  ``error``) still gives the result. A shell command that exits non-zero is ``status: completed`` with
  ``metadata.exit`` != 0, reported here as an error.
- session.start: the ``session`` row and the plugin's ``session.created`` event.
- Sub-agents: the ``task`` tool runs one as a child session (``parentID`` names the parent). Its
  ``session.start`` carries ``gen_ai.session.parent.id`` and, from a row, the task call that started it
  (``gen_ai.subagent.parent_tool_call.id``, read with the row or looked up: ``opencode_links``); the pipeline
  (``Correlator``) then reports the child's work in the parent session as that sub-agent's. The task call's
  part (``state.metadata.sessionId``) and ``tool.execute.after`` name the child: the task tool.result gets
  ``gen_ai.subagent.id`` and a ``subagent.end`` comes with it.
- session.end: ``session.deleted`` (``session.reason: deleted``), and the plugin's own ``plugin.dispose``
  line per session the process ran, written when OpenCode disposes its plugins at exit
  (``session.reason: exit``; a later ``run --continue`` opens it again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from collector.agents.common import (
    HookEnvelope,
    as_int,
    hook_entry,
    iso_to_ns,
    native_entry,
    payload_digest,
    text_message,
    usage_attributes,
)
from collector.agents.opencode_links import call_in, task_call
from collector.model import AgentActivityEntry, RawRecord
from collector.model.boundary import Refused
from collector.model.decode import loads_text

TASK_TOOL = "task"  # OpenCode's tool that runs a sub-agent (a child session)
Emit = Callable[[str, "int | None", "str | None", str, dict[str, Any]], AgentActivityEntry]


def parse(record: RawRecord) -> list[AgentActivityEntry]:
    if record.kind == "sqlite":
        return _parse_row(record)
    if record.kind == "export":
        return _parse_export(record)
    return _parse_hook(record)


# --------------------------------------------------------------------------------------------- shared


def _message(emit: Emit, info: dict[str, Any], session: str | None,
             parts: list[Any] | None = None) -> list[AgentActivityEntry]:
    """A ``message`` object (row data plus id, or a ``message.updated`` event's ``info``), with its parts
    when they are known (a row's ``text_parts``, an export's ``parts``)."""
    msg_id = info.get("id")
    if not isinstance(msg_id, str):
        return []
    times = _obj(info.get("time"))
    created = as_int(times.get("created"))
    if info.get("role") == "user":
        return [emit("user.prompt", created, session, msg_id, _prompt_attrs(msg_id, parts or []))]
    completed = as_int(times.get("completed"))
    if info.get("role") != "assistant" or completed is None:
        return []  # still streaming: its tokens are not final yet
    entries = [emit("llm.response", completed, session, msg_id, _response_attrs(info, created, completed))]
    error = info.get("error")
    if isinstance(error, dict):
        data = _obj(error.get("data"))
        attrs = {"gen_ai.turn.id": info.get("parentID"), "error.type": str(error.get("name") or "api_error"),
                 "error.message": data.get("message") if isinstance(data.get("message"), str) else None}
        entries.append(emit("error", completed, session, msg_id, attrs))
    if info.get("summary") is True:
        turn = {"gen_ai.turn.id": info.get("parentID")}
        entries.append(emit("compaction", completed, session, msg_id, turn))
    return entries


def _prompt_attrs(msg_id: str, parts: list[Any]) -> dict[str, Any]:
    """The turn id and, when the message has text parts, the text the user typed (its non-synthetic text
    parts; the synthetic ones are OpenCode's own additions, such as a read file's content)."""
    attrs: dict[str, Any] = {"gen_ai.turn.id": msg_id}
    texts = [p for p in parts if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)]
    if texts:
        text = "\n".join(p["text"] for p in texts if not p.get("synthetic"))
        attrs["gen_ai.input.messages"] = text_message("user", text)
    return attrs


def _response_attrs(info: dict[str, Any], created: int | None, completed: int) -> dict[str, Any]:
    tokens = _obj(info.get("tokens"))
    cache = _obj(tokens.get("cache"))
    fresh, read, write = (as_int(tokens.get("input")), as_int(cache.get("read")) or 0,
                          as_int(cache.get("write")) or 0)
    output, reasoning = as_int(tokens.get("output")), as_int(tokens.get("reasoning"))
    cost = info.get("cost")
    return {
        "gen_ai.provider.name": info.get("providerID"),
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": info.get("modelID"),
        "gen_ai.response.model": info.get("modelID"),
        "gen_ai.response.id": info.get("id"),
        "gen_ai.turn.id": info.get("parentID"),
        "gen_ai.agent.name": info.get("agent"),
        "gen_ai.response.finish_reasons": [info["finish"]] if isinstance(info.get("finish"), str) else None,
        "gen_ai.usage.cost_usd": cost if type(cost) in (int, float) else None,
        "duration_ms": completed - created if created is not None and completed >= created else None,
        **usage_attributes(
            None if fresh is None else fresh + read + write,
            None if output is None else output + (reasoning or 0),
            read,
            write,
            reasoning,
        ),
    }


def _tool_part(emit: Emit, part: dict[str, Any], session: str | None) -> list[AgentActivityEntry]:
    """A ``part`` of type ``tool``: tool.call once it runs (its input is known), tool.result when done."""
    state = _obj(part.get("state"))
    call_id, status = part.get("callID"), state.get("status")
    if not isinstance(call_id, str) or status not in ("running", "completed", "error"):
        return []
    times = _obj(state.get("time"))
    start, end = as_int(times.get("start")), as_int(times.get("end"))
    call = {"gen_ai.tool.name": part.get("tool"), "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": state.get("input"), "gen_ai.tool.type": _tool_type(part.get("tool"))}
    entries = [emit("tool.call", start, session, call_id, call)]
    if status == "running":
        return entries
    result = _result_attrs(call_id, part.get("tool"), state.get("metadata"), state.get("output"),
                           state.get("error") if status == "error" else None, status == "error")
    if start is not None and end is not None and end >= start:
        result["duration_ms"] = end - start
    entries.append(emit("tool.result", end, session, call_id, result))
    return entries + _subagent_end(emit, end, session, result, state.get("input"))


def _tool_type(tool: Any) -> str | None:
    return "agent" if tool == TASK_TOOL else None


def _subagent_end(emit: Emit, time_ms: int | None, session: str | None, result: dict[str, Any],
                  args: Any) -> list[AgentActivityEntry]:
    """The task call's result: its sub-agent (the child session it names) has ended."""
    child = result.get("gen_ai.subagent.id")
    if not isinstance(child, str):
        return []
    attrs = {"gen_ai.agent.scope": "subagent", "gen_ai.agent.id": child,
             "gen_ai.subagent.parent_tool_call.id": result["gen_ai.tool.call.id"],
             "gen_ai.subagent.type": _str(_obj(args).get("subagent_type"))}
    return [emit("subagent.end", time_ms, session, child, attrs)]


def _result_attrs(call_id: str, tool: Any, metadata: Any, output: Any, error: Any,
                  errored: bool) -> dict[str, Any]:
    exit_code = as_int(metadata.get("exit")) if isinstance(metadata, dict) else None
    failed = errored or exit_code not in (None, 0)
    attrs: dict[str, Any] = {"gen_ai.tool.name": tool, "gen_ai.tool.call.id": call_id,
                             "tool.result.status": "error" if failed else "success",
                             "process.exit.code": exit_code}
    child = metadata.get("sessionId") if isinstance(metadata, dict) and tool == TASK_TOOL else None
    if isinstance(child, str) and child:
        attrs["gen_ai.subagent.id"] = child
    if failed:
        attrs["error.type"] = "exit_code" if exit_code not in (None, 0) else "tool_error"
        message = error if isinstance(error, str) and error else output
        attrs["error.message"] = message if isinstance(message, str) else None
    else:
        attrs["gen_ai.tool.call.result"] = output
    return attrs


def _session_row(emit: Emit, info: dict[str, Any], session: str | None,
                 db_path: str | None = None) -> list[AgentActivityEntry]:
    """A session's start; a child session (a sub-agent's) names its parent, and the task call that started
    it when the database already says: in the row's ``task_parts`` (read with it), else asked of the
    database (``db_path``)."""
    times = _obj(info.get("time"))
    created = as_int(info.get("time_created")) or as_int(times.get("created"))
    attrs = {"session.source": "startup", "workspace.path": info.get("directory"),
             "agent.version": info.get("version")}
    parent = info.get("parent_id") or info.get("parentID")
    if isinstance(parent, str) and parent:
        attrs.update({"gen_ai.agent.scope": "subagent", "gen_ai.agent.id": session,
                      "gen_ai.session.parent.id": parent})
        if "task_parts" in info and session:
            attrs["gen_ai.subagent.parent_tool_call.id"] = call_in(info["task_parts"], session)
        elif db_path and session:
            attrs["gen_ai.subagent.parent_tool_call.id"] = task_call(db_path, parent, session)
    return [emit("session.start", created, session, "created", attrs)]


# ------------------------------------------------------------------------------------------- database


def _parse_row(record: RawRecord) -> list[AgentActivityEntry]:
    table, row = record.data.get("table"), record.data.get("row")
    if not isinstance(row, dict):
        return []

    def emit(name: str, time_ms: int | None, session: str | None, native: str,
             attrs: dict[str, Any]) -> AgentActivityEntry:
        return native_entry(record, name, iso_to_ns(time_ms), session, native, attrs)

    if table == "session":
        return _session_row(emit, row, _str(row.get("id")), _str(record.meta.get("path")))
    data = _json(row.get("data"))
    if not isinstance(data, dict):
        if table in ("message", "part") and row.get("data") is not None:
            raise Refused(f"the {table} row's data is not a JSON object")  # quarantined and counted
        return []
    session = _str(row.get("session_id"))
    if table == "message":  # only a user message's text parts are read (an assistant's say nothing here)
        parts = [_json(p) for p in _list(_json(row.get("text_parts")))] if data.get("role") == "user" else None
        return _message(emit, {**data, "id": row.get("id")}, session, parts)
    if table == "part" and data.get("type") == "tool":
        return _tool_part(emit, data, session)
    return []


# ------------------------------------------------------------------------------------- CLI export


def _parse_export(record: RawRecord) -> list[AgentActivityEntry]:
    """``opencode export <id>`` (the ``command`` source): ``{info, messages: [{info, parts}]}``, the same
    objects as the database's rows, so the same entries with the same ids."""

    def emit(name: str, time_ms: int | None, session: str | None, native: str,
             attrs: dict[str, Any]) -> AgentActivityEntry:
        return native_entry(record, name, iso_to_ns(time_ms), session, native, attrs)

    info = _obj(record.data.get("info"))
    session = _str(info.get("id"))
    if session is None:
        return []
    entries = _session_row(emit, info, session)
    for message in _list(record.data.get("messages")):
        msg = _obj(_obj(message).get("info"))
        entries += _message(emit, msg, _str(msg.get("sessionID")) or session, _list(_obj(message).get("parts")))
        for part in _list(_obj(message).get("parts")):
            if isinstance(part, dict) and part.get("type") == "tool":
                entries += _tool_part(emit, part, _str(part.get("sessionID")) or session)
    return entries


# ------------------------------------------------------------------------------------- plugin (spool)


def _parse_hook(record: RawRecord) -> list[AgentActivityEntry]:
    """Plugin hooks arrive as ``{input, output}``; bus events as the event itself (``{id, type,
    properties}``), named by their type (``session.created``) or, in older captures, ``event:<type>``."""
    hook = HookEnvelope(record)
    event = hook.event.removeprefix("event:")
    handler = _HOOKS.get(event)
    if handler is None:
        return []
    if event in _BUS_EVENTS and "properties" in hook.payload:
        inp, out = hook.payload, None
    else:
        inp, out = hook.get("input"), hook.get("output")
    return handler(record, hook, _obj(inp), _obj(out))


def _hook_emit(record: RawRecord, hook: HookEnvelope) -> Emit:
    """Entries from bus events carry OpenCode's own time of the fact, as the same row would."""

    def emit(name: str, time_ms: int | None, session: str | None, native: str,
             attrs: dict[str, Any]) -> AgentActivityEntry:
        entry = hook_entry(record, hook, name, session, native, attrs)
        entry.time_ns = iso_to_ns(time_ms) or entry.time_ns
        return entry

    return emit


def _bus_props(inp: dict[str, Any]) -> dict[str, Any]:
    props = inp.get("properties")
    return props if isinstance(props, dict) else {}


def _session_created(record: RawRecord, hook: HookEnvelope, inp: dict[str, Any],
                     out: dict[str, Any]) -> list[AgentActivityEntry]:
    props = _bus_props(inp)
    info = _obj(props.get("info"))
    session = _str(props.get("sessionID")) or _str(info.get("id"))
    return _session_row(_hook_emit(record, hook), info, session)


def _chat_message(record: RawRecord, hook: HookEnvelope, inp: dict[str, Any],
                  out: dict[str, Any]) -> list[AgentActivityEntry]:
    message = _obj(out.get("message"))
    msg_id = _str(message.get("id"))
    if not msg_id or message.get("role", "user") != "user":
        return []
    attrs = _prompt_attrs(msg_id, _list(out.get("parts")))
    attrs.setdefault("gen_ai.input.messages", text_message("user", ""))
    session = _str(inp.get("sessionID")) or _str(message.get("sessionID"))
    return [hook_entry(record, hook, "user.prompt", session, msg_id, attrs)]


def _chat_params(record: RawRecord, hook: HookEnvelope, inp: dict[str, Any],
                 out: dict[str, Any]) -> list[AgentActivityEntry]:
    model = _obj(inp.get("model"))
    message = _obj(inp.get("message"))
    attrs = {
        "gen_ai.provider.name": _str(model.get("providerID")),
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": _str(model.get("id")),
        "gen_ai.request.max_tokens": as_int(out.get("maxOutputTokens")),
        "gen_ai.agent.name": _str(inp.get("agent")),
        "gen_ai.turn.id": _str(message.get("id")),
    }
    # Two steps of one turn send identical params: the receive time tells them apart.
    native = f"params:{hook.time_ns}:{payload_digest(hook.payload)}"
    return [hook_entry(record, hook, "llm.request", _str(inp.get("sessionID")), native, attrs)]


def _tool_before(record: RawRecord, hook: HookEnvelope, inp: dict[str, Any],
                 out: dict[str, Any]) -> list[AgentActivityEntry]:
    call_id = _str(inp.get("callID"))
    if not call_id:
        return []
    attrs = {"gen_ai.tool.name": inp.get("tool"), "gen_ai.tool.call.id": call_id,
             "gen_ai.tool.call.arguments": out.get("args"), "gen_ai.tool.type": _tool_type(inp.get("tool"))}
    return [hook_entry(record, hook, "tool.call", _str(inp.get("sessionID")), call_id, attrs)]


def _tool_after(record: RawRecord, hook: HookEnvelope, inp: dict[str, Any],
                out: dict[str, Any]) -> list[AgentActivityEntry]:
    call_id = _str(inp.get("callID"))
    if not call_id:
        return []
    attrs = _result_attrs(call_id, inp.get("tool"), out.get("metadata"), out.get("output"), None, False)
    session = _str(inp.get("sessionID"))
    entries = [hook_entry(record, hook, "tool.result", session, call_id, attrs)]
    return entries + _subagent_end(_hook_emit(record, hook), None, session, attrs, inp.get("args"))


def _message_updated(record: RawRecord, hook: HookEnvelope, inp: dict[str, Any],
                     out: dict[str, Any]) -> list[AgentActivityEntry]:
    props = _bus_props(inp)
    info = props.get("info")
    if not isinstance(info, dict) or info.get("role") != "assistant":
        return []  # the user message comes with its text in chat.message
    return _message(_hook_emit(record, hook), info, _str(info.get("sessionID")))


def _part_updated(record: RawRecord, hook: HookEnvelope, inp: dict[str, Any],
                  out: dict[str, Any]) -> list[AgentActivityEntry]:
    part = _bus_props(inp).get("part")
    if not isinstance(part, dict) or part.get("type") != "tool":
        return []
    return _tool_part(_hook_emit(record, hook), part, _str(part.get("sessionID")))


def _session_error(record: RawRecord, hook: HookEnvelope, inp: dict[str, Any],
                   out: dict[str, Any]) -> list[AgentActivityEntry]:
    props = _bus_props(inp)
    error = _obj(props.get("error"))
    data = _obj(error.get("data"))
    attrs = {"error.type": str(error.get("name") or "session_error"),
             "error.message": data.get("message") if isinstance(data.get("message"), str) else None}
    return [hook_entry(record, hook, "error", _str(props.get("sessionID")), attributes=attrs)]


HookHandler = Callable[[RawRecord, HookEnvelope, dict[str, Any], dict[str, Any]], list[AgentActivityEntry]]


def _session_end(reason: str) -> HookHandler:
    """``session.deleted`` (the user deleted it) and our ``plugin.dispose`` (OpenCode ended the process that
    ran it, e.g. after ``opencode run``): the session ends, for the given reason."""

    def handler(record: RawRecord, hook: HookEnvelope, inp: dict[str, Any],
                out: dict[str, Any]) -> list[AgentActivityEntry]:
        props = _bus_props(inp)
        session = _str(props.get("sessionID")) or _str(_obj(props.get("info")).get("id"))
        if session is None:
            return []
        return [hook_entry(record, hook, "session.end", session, attributes={"session.reason": reason})]

    return handler


_HOOKS: dict[str, HookHandler] = {
    "session.created": _session_created,
    "chat.message": _chat_message,
    "chat.params": _chat_params,
    "tool.execute.before": _tool_before,
    "tool.execute.after": _tool_after,
    "message.updated": _message_updated,
    "message.part.updated": _part_updated,
    "session.error": _session_error,
    "session.deleted": _session_end("deleted"),
    "plugin.dispose": _session_end("exit"),
}
_BUS_EVENTS = {"session.created", "message.updated", "message.part.updated", "session.error", "session.deleted",
               "plugin.dispose"}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _json(value: Any) -> Any:
    """A JSON column's value, decoded as the files are (a lone surrogate escape becomes U+FFFD)."""
    if isinstance(value, (str, bytes)):
        try:
            return loads_text(value)
        except orjson.JSONDecodeError:
            return None
    return value


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
