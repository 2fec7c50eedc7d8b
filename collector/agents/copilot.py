"""GitHub Copilot CLI: command hooks (spool) and the session log
``~/.copilot/session-state/<session id>/events.jsonl``.

Copilot's hooks carry no id for a prompt, a model call or a tool call (``preToolUse``/``postToolUse`` name
the tool and its arguments only), so nothing a hook reports could be matched with the session log. The
log is therefore authoritative for every entry; the hooks feed the status tracker and make no entry.

Log lines are ``{type, data, id, timestamp, parentId}``; they carry no session id: it is the name of the
log's folder. Types read:

- ``session.start`` / ``session.resume`` (a ``--continue`` process) -> ``session.start``;
  ``session.shutdown`` (each process, at exit) -> ``session.end``.
- ``user.message`` -> ``user.prompt``; its ``interactionId`` is the turn id (``turnId`` counts model calls
  within the turn).
- ``session.usage_record`` -> ``llm.response``: one per model call, with the provider's response id
  (``apiCallId``), ``inputTokens`` (cached tokens included), ``outputTokens``, ``cacheReadTokens``,
  ``cacheWriteTokens`` and ``duration`` (ms).
- ``tool.execution_start`` -> ``tool.call``; ``tool.execution_complete`` -> ``tool.result``. A shell
  command that exits 1 is ``success: true`` with ``shellExecution.exitCode: 1`` beside it: it is an error
  here (``error.type: exit_code``), as for Gemini CLI.
- Sub-agents (the ``task`` tool) write into the same log: every line of theirs carries the sub-agent's id
  (top-level ``agentId``) and the id of the ``task`` call that started it (``parentToolCallId`` in the
  data, in ``data.usage`` for a model call, ``toolCallId`` for ``subagent.*``). ``subagent.started`` ->
  ``subagent.start``; ``subagent.completed`` / ``subagent.failed`` -> ``subagent.end``; its model calls and
  tools get ``gen_ai.agent.scope: subagent``, ``gen_ai.agent.id`` and
  ``gen_ai.subagent.parent_tool_call.id``; its ``user.message`` (the task's prompt) is not a user prompt.
  The ``task`` call's result names the sub-agent (``toolTelemetry.restrictedProperties.agent_id``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePath
from typing import Any

from collector.agents.common import (
    as_int,
    iso_to_ns,
    native_entry,
    text_message,
    usage_attributes,
    wrong_types,
)
from collector.model import AgentActivityEntry, RawRecord

TASK_TOOL = "task"  # the tool that starts a sub-agent


def parse(record: RawRecord) -> list[AgentActivityEntry]:
    if record.kind != "transcript":
        return []  # hooks: no ids to match the log with; the status tracker reads them
    data = record.data
    kind, event_id, body = data.get("type"), data.get("id"), data.get("data")
    handler = _EVENTS.get(kind) if isinstance(kind, str) else None
    if handler is None or not isinstance(event_id, str) or not isinstance(body, dict):
        return []  # another kind, or no id or body (another type: the definition's field_types count it)
    entries = handler(record, _session(record, body), event_id, iso_to_ns(data.get("timestamp")), body)
    agent_id = data.get("agentId")
    if isinstance(agent_id, str) and agent_id:  # a line of a sub-agent's
        scope = {"gen_ai.agent.scope": "subagent", "gen_ai.agent.id": agent_id,
                 "gen_ai.subagent.parent_tool_call.id": _parent_call(body)}
        entries = [e for e in entries if e.name != "user.prompt"]  # the task's prompt, not the user's
        for entry in entries:
            entry.attributes.update({k: v for k, v in scope.items() if v is not None})
    return entries


def _parent_call(body: dict[str, Any]) -> str | None:
    usage = body.get("usage")
    for value in (body.get("parentToolCallId"), usage.get("parentToolCallId") if isinstance(usage, dict) else None):
        if isinstance(value, str) and value:
            return value
    return None


def _session(record: RawRecord, body: dict[str, Any]) -> str | None:
    folder = PurePath(str(record.meta.get("path", ""))).parent.name
    if folder and folder != "session-state":
        return folder
    session = body.get("sessionId")
    return session if isinstance(session, str) and session else None


Handler = Callable[[RawRecord, "str | None", str, "int | None", dict[str, Any]], list[AgentActivityEntry]]


def _start(record: RawRecord, session: str | None, event_id: str, time_ns: int | None,
           body: dict[str, Any]) -> list[AgentActivityEntry]:
    resumed = record.data.get("type") == "session.resume"
    attrs: dict[str, Any] = {"session.source": "resume" if resumed else "startup"}
    context = body.get("context")
    if isinstance(context, dict) and isinstance(context.get("cwd"), str):
        attrs["workspace.path"] = context["cwd"]
    return [native_entry(record, "session.start", time_ns, session, event_id, attrs)]


def _shutdown(record: RawRecord, session: str | None, event_id: str, time_ns: int | None,
              body: dict[str, Any]) -> list[AgentActivityEntry]:
    attrs = {"session.reason": body.get("shutdownType") or "exit"}
    return [native_entry(record, "session.end", time_ns, session, event_id, attrs)]


def _user(record: RawRecord, session: str | None, event_id: str, time_ns: int | None,
          body: dict[str, Any]) -> list[AgentActivityEntry]:
    turn, text = body.get("interactionId"), body.get("content")
    if not isinstance(turn, str) or not turn or not isinstance(text, str):
        return wrong_types(record, body, {"interactionId": str, "content": str}, "user message ")
    attrs = {"gen_ai.turn.id": turn, "gen_ai.input.messages": text_message("user", text)}
    return [native_entry(record, "user.prompt", time_ns, session, turn, attrs)]


def _usage(record: RawRecord, session: str | None, event_id: str, time_ns: int | None,
           body: dict[str, Any]) -> list[AgentActivityEntry]:
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return []
    response = usage.get("apiCallId")
    response_id = response if isinstance(response, str) and response else event_id
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": usage.get("model"),
        "gen_ai.response.model": usage.get("model"),
        "gen_ai.response.id": response_id,
        "duration_ms": as_int(usage.get("duration")),
        **usage_attributes(as_int(usage.get("inputTokens")), as_int(usage.get("outputTokens")),
                           as_int(usage.get("cacheReadTokens")) or 0, as_int(usage.get("cacheWriteTokens")) or 0),
    }
    if isinstance(usage.get("finishReason"), str):
        attrs["gen_ai.response.finish_reasons"] = [usage["finishReason"]]
    attrs = {k: v for k, v in attrs.items() if v is not None}
    return [native_entry(record, "llm.response", time_ns, session, response_id, attrs)]


def _tool_start(record: RawRecord, session: str | None, event_id: str, time_ns: int | None,
                body: dict[str, Any]) -> list[AgentActivityEntry]:
    call_id = body.get("toolCallId")
    if not isinstance(call_id, str) or not call_id:
        return []
    attrs = {"gen_ai.tool.name": body.get("toolName"), "gen_ai.tool.call.id": call_id,
             "gen_ai.tool.call.arguments": body.get("arguments")}
    if body.get("toolName") == TASK_TOOL:
        attrs["gen_ai.tool.type"] = "agent"
    return [native_entry(record, "tool.call", time_ns, session, call_id, attrs)]


def _tool_complete(record: RawRecord, session: str | None, event_id: str, time_ns: int | None,
                   body: dict[str, Any]) -> list[AgentActivityEntry]:
    call_id = body.get("toolCallId")
    if not isinstance(call_id, str) or not call_id:
        return []
    shell = body.get("shellExecution")
    exit_code = as_int(shell.get("exitCode")) if isinstance(shell, dict) else None
    output = _content(body.get("result"))
    error = body.get("error")
    error_text = error.get("message") if isinstance(error, dict) else error
    failed = body.get("success") is not True or exit_code not in (None, 0)
    attrs: dict[str, Any] = {"gen_ai.tool.call.id": call_id,
                             "tool.result.status": "error" if failed else "success"}
    if exit_code is not None:
        attrs["process.exit.code"] = exit_code
    if failed:
        attrs["error.type"] = "exit_code" if exit_code not in (None, 0) else "tool_error"
        message = error_text if isinstance(error_text, str) and error_text else output
        if message is not None:
            attrs["error.message"] = message
    elif output is not None:
        attrs["gen_ai.tool.call.result"] = output
    started = _started_agent(body)
    if started:
        attrs["gen_ai.subagent.id"] = started
    return [native_entry(record, "tool.result", time_ns, session, call_id, attrs)]


def _started_agent(body: dict[str, Any]) -> str | None:
    """The sub-agent a ``task`` call ran, as its result's telemetry names it."""
    telemetry = body.get("toolTelemetry")
    restricted = telemetry.get("restrictedProperties") if isinstance(telemetry, dict) else None
    agent_id = restricted.get("agent_id") if isinstance(restricted, dict) else None
    return agent_id if isinstance(agent_id, str) and agent_id else None


def _subagent(record: RawRecord, session: str | None, event_id: str, time_ns: int | None,
              body: dict[str, Any]) -> list[AgentActivityEntry]:
    agent_id, call_id = record.data.get("agentId"), body.get("toolCallId")
    if not isinstance(agent_id, str) or not agent_id or not isinstance(call_id, str) or not call_id:
        return []
    kind = record.data.get("type")
    attrs: dict[str, Any] = {"gen_ai.agent.scope": "subagent", "gen_ai.agent.id": agent_id,
                             "gen_ai.subagent.parent_tool_call.id": call_id,
                             "gen_ai.subagent.type": body.get("agentType") or body.get("agentName")}
    if kind == "subagent.started":
        return [native_entry(record, "subagent.start", time_ns, session, agent_id,
                             {k: v for k, v in attrs.items() if v is not None})]
    if kind == "subagent.failed":
        attrs.update({"session.reason": "failed", "error.type": "subagent_failed", "error.message": body.get("error")})
    else:
        attrs["session.reason"] = "cancelled" if body.get("cancelled") is True else "completed"
    attrs["duration_ms"] = as_int(body.get("durationMs"))
    return [native_entry(record, "subagent.end", time_ns, session, agent_id,
                         {k: v for k, v in attrs.items() if v is not None})]


def _content(result: Any) -> str | None:
    if isinstance(result, dict):
        for key in ("content", "detailedContent"):
            if isinstance(result.get(key), str):
                return str(result[key])
    return result if isinstance(result, str) else None


_EVENTS: dict[str, Handler] = {
    "session.start": _start,
    "session.resume": _start,
    "session.shutdown": _shutdown,
    "user.message": _user,
    "session.usage_record": _usage,
    "tool.execution_start": _tool_start,
    "tool.execution_complete": _tool_complete,
    "subagent.started": _subagent,
    "subagent.completed": _subagent,
    "subagent.failed": _subagent,
}
