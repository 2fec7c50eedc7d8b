"""Qwen Code: Claude-style hook payloads (spool) and chat logs
(``~/.qwen/projects/<cwd slug>/chats/<session id>.jsonl``, one JSON record per line, Gemini-style parts).

Which input is authoritative for what:

- Prompts: the ``UserPromptSubmit`` hook, whose ``prompt_id`` (``<session>########<n>``) is the turn id.
  It fires twice per turn, the second time after the tool batch with an empty prompt and the same
  ``prompt_id``: one prompt is one turn, so the empty one is dropped. The chat log's ``user`` record has
  no prompt id, but the ``ui_telemetry`` records of its turn do: the first telemetry record of a prompt id
  looks back through the file for the ``user`` record before it and reports the prompt with that id
  (text and time from the user record). Hook and chat log give the same event id; whichever is read
  first is kept (they agree on the text; the hook's time is when Qwen ran it, the chat log's when it
  wrote it, some milliseconds apart). A prompt whose turn wrote no telemetry at all (killed before the
  first model call answered) is not in the chat log's ids, so only the hook reports it.
- Model calls: the chat log's ``system/ui_telemetry`` record with ``event.name = qwen-code.api_response``
  (response id, model, tokens, latency, prompt id). The ``assistant`` record repeats the tokens without
  the response id; it gives the tool calls only. Prompt tokens (``input_token_count``) include cached.
- Tool calls and results: hooks (``PreToolUse``, ``PostToolUse``/``PostToolUseFailure``) and the chat log
  (the assistant's ``functionCall`` parts and the ``tool_result`` records) both carry the model's tool
  call id (hooks: ``tool_call_id``; ``tool_use_id`` is a different, hook-only id), so they dedupe. Both
  say ``error`` for a command that exits non-zero.

There is no SessionEnd in ``-p`` mode; the status tracker's idle rule closes such sessions.
"""

from __future__ import annotations

import re
from typing import Any

from collector.agents.common import (
    HookEnvelope,
    as_int,
    hook_entry,
    iso_to_ns,
    native_entry,
    text_message,
    usage_attributes,
    wrong_types,
)
from collector.agents.families.claude_hooks import Dialect, HookProtocol, text_or_none, tool_failure
from collector.agents.families.gemini_chat import (
    exit_code_in,
    function_calls,
    function_output,
    function_responses,
    message_parts,
    text_of,
    tool_call_attrs,
)
from collector.agents.lookbehind import lines_before
from collector.model import AgentActivityEntry, RawRecord

_EXIT_CODE = re.compile(r"^Exit Code:\s*(-?\d+)", re.MULTILINE)  # in Qwen's case only (the Gemini CLI's: any)


OTEL_KINDS = frozenset({"otel_log", "otel_span", "otel_metric"})  # spans and metrics make nothing


def parse(record: RawRecord) -> list[AgentActivityEntry]:
    if record.kind == "transcript":
        return _parse_chat(record)
    if record.kind in OTEL_KINDS:
        return _parse_otel(record)
    return _HOOKS.parse(record)


def _parse_otel(record: RawRecord) -> list[AgentActivityEntry]:
    """Qwen Code's own OpenTelemetry (``telemetry`` in its settings.json, switched on by ``install
    --telemetry``), as the OTLP receiver's records: its ``qwen-code.api_response`` log event carries the
    attributes its chat log's ``ui_telemetry`` record of the same call carries (response id, model,
    tokens, duration, prompt id; tests/fixtures/qwen-code-telemetry), so it makes the same entry, with the
    same id: the pipeline's merge keeps one (docs/merge.md). Other events are what the hooks and the chat
    log already make; spans and metrics (sums of the same calls) make nothing."""
    log = record.data.get("log")
    attrs = log.get("attributes") if isinstance(log, dict) and record.kind == "otel_log" else None
    if not isinstance(attrs, dict) or attrs.get("event.name") != "qwen-code.api_response":
        return []
    session = attrs.get("session.id")
    time_ns = as_int(log.get("time_unix_nano")) if isinstance(log, dict) else None
    return _api_response(record, attrs, session if isinstance(session, str) and session else None, time_ns)


# ---------------------------------------------------------------------------------------------- hooks


def _call_id(hook: HookEnvelope) -> str | None:
    """The model's tool call id, which the chat log shares (``tool_use_id`` is a hook-only id)."""
    return text_or_none(hook.get("tool_call_id") or hook.get("tool_use_id"))


def _has_call_id(hook: HookEnvelope) -> bool:
    return _call_id(hook) is not None


def _tool_scope(hook: HookEnvelope) -> dict[str, Any]:
    return _subagent_scope(hook.get("agent_id"), _agent_name(hook.get("agent_id")))


def _success(hook: HookEnvelope) -> dict[str, Any]:
    response = hook.get("tool_response")
    output = response.get("llmContent") if isinstance(response, dict) else response
    attrs: dict[str, Any] = {}
    _set_status(attrs, exit_code_in(output, _EXIT_CODE), None, response)
    return attrs


def _failure(hook: HookEnvelope) -> dict[str, Any]:
    message = _as_text(hook.get("error"))
    code = exit_code_in(message, _EXIT_CODE)
    return {**tool_failure(hook, message, code), "process.exit.code": code}


def _subagent(hook: HookEnvelope) -> dict[str, Any]:
    return {"gen_ai.subagent.type": hook.get("agent_type"), "gen_ai.turn.id": _turn_of(hook.get("prompt_id")),
            **_subagent_scope(hook.get("agent_id"), hook.get("agent_type"))}


def _subagent_key(hook: HookEnvelope) -> str | None:
    """The sub-agent's id: the start its own log reports has it too."""
    return text_or_none(hook.get("agent_id"))


def _stop_failure(record: RawRecord, hook: HookEnvelope, session: str | None) -> list[AgentActivityEntry]:
    attrs = {"gen_ai.turn.id": hook.get("prompt_id"),
             "error.type": str(hook.get("error_type") or "api_error"),
             "error.message": _as_text(hook.get("error"))}
    return [hook_entry(record, hook, "error", session, attributes=attrs)]


def _subagent_scope(agent_id: Any, agent_name: Any) -> dict[str, Any]:
    """A sub-agent's id is ``<agent name>-<the id of the tool call that started it>``."""
    if not isinstance(agent_id, str) or not agent_id:
        return {}
    attrs = {"gen_ai.agent.scope": "subagent", "gen_ai.agent.id": agent_id}
    if isinstance(agent_name, str) and agent_name and agent_id.startswith(agent_name + "-"):
        attrs["gen_ai.subagent.parent_tool_call.id"] = agent_id[len(agent_name) + 1:]
    return attrs


def _turn_of(prompt_id: Any) -> str | None:
    """The main prompt a prompt id belongs to: ``<session>########<n>``, also for the automatic
    follow-ups (``…########<n>/automatic/<k>``); a sub-agent's own prompt ids
    (``<session>#<agent id>#<n>``) name no turn of the session (the turn is then the one at its time)."""
    if not isinstance(prompt_id, str) or "########" not in prompt_id:
        return None
    return prompt_id.split("/", 1)[0]


_HOOKS = HookProtocol(Dialect(
    success=_success,
    failure=_failure,
    prompt_turn=text_or_none,
    drops_empty_prompts=True,  # the second UserPromptSubmit of a turn (after the tool batch)
    tool_turn=_turn_of,
    call_id=_call_id,
    describes_tool=_has_call_id,
    tool_scope=_tool_scope,
    subagent=_subagent,
    subagent_key=_subagent_key,
    extra={"StopFailure": _stop_failure},
))

# ------------------------------------------------------------------------------------------- chat log


def _parse_chat(record: RawRecord) -> list[AgentActivityEntry]:
    data = record.data
    session, faults = _session_of(record, data.get("sessionId"))
    kind = data.get("type")
    time_ns = iso_to_ns(data.get("timestamp"))
    if kind == "assistant":
        entries = _message_faults(record, data) + _assistant(record, data, session, time_ns)
    elif kind == "tool_result":
        entries = _message_faults(record, data) + _tool_result(record, data, session, time_ns)
    elif kind == "system" and data.get("subtype") == "ui_telemetry":
        entries = _telemetry(record, data, session, time_ns)
    elif kind == "user" and data.get("isSidechain") and data.get("parentUuid") is None:
        entries = _subagent_begins(record, data, session, time_ns)
    else:
        return wrong_types(record, data, {"subtype": str, "systemPayload": dict})  # type: the definition's
    if faults and entries:  # made without their session
        entries = faults + entries
    scope = _subagent_scope(data.get("agentId"), data.get("agentName"))  # a sub-agent's own log
    for entry in entries if scope else []:
        entry.attributes.update(scope)
    cwd = data.get("cwd")  # every chat record names the working directory
    if isinstance(cwd, str) and cwd:
        for entry in entries:
            entry.attributes.setdefault("workspace.path", cwd)
    return entries


def _session_of(record: RawRecord, value: Any) -> tuple[str | None, list[AgentActivityEntry]]:
    """The record's session id: a string, or an integer written as one; anything else is left out, said."""
    if isinstance(value, str) or value is None:
        return value, []
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value), []
    return None, wrong_types(record, {"sessionId": value}, {"sessionId": str})


def _message_faults(record: RawRecord, data: dict[str, Any]) -> list[AgentActivityEntry]:
    """A ``message`` that is not ``{role, parts: [...]}``: its tool calls or results cannot be read."""
    message = data.get("message")
    if isinstance(message, dict):
        return wrong_types(record, message, {"parts": list}, "message.")
    return wrong_types(record, data, {"message": dict})


def _subagent_begins(record: RawRecord, data: dict[str, Any], session: str | None,
                     time_ns: int | None) -> list[AgentActivityEntry]:
    """The first record of a sub-agent's own log (its task): the sub-agent starts."""
    agent_id = data.get("agentId")
    if not isinstance(agent_id, str) or not agent_id:
        return []
    attrs = {"gen_ai.subagent.type": data.get("agentName")}
    return [native_entry(record, "subagent.start", time_ns, session, agent_id, attrs)]


def _agent_name(agent_id: Any) -> str | None:
    """The agent name in a sub-agent id ``<name>-call_…`` (hooks name the id, not always the type)."""
    if isinstance(agent_id, str) and "-call_" in agent_id:
        return agent_id.rsplit("-call_", 1)[0]
    return None


def _assistant(record: RawRecord, data: dict[str, Any], session: str | None,
               time_ns: int | None) -> list[AgentActivityEntry]:
    calls = function_calls(message_parts(data.get("message")))
    return [native_entry(record, "tool.call", time_ns, session, call["id"], tool_call_attrs(call)) for call in calls]


def _tool_result(record: RawRecord, data: dict[str, Any], session: str | None,
                 time_ns: int | None) -> list[AgentActivityEntry]:
    result = data.get("toolCallResult")
    if not isinstance(result, dict) or not isinstance(result.get("callId"), str):
        return []
    call_id = result["callId"]
    name, output, error = None, None, result.get("error")
    for response in function_responses(message_parts(data.get("message"))):
        if response.get("id") == call_id:
            name, found = response.get("name"), function_output(response)
            if found is not None:
                output, error = found[0], error or found[1]
    display = result.get("resultDisplay")
    code = as_int(display.get("exitCode")) if isinstance(display, dict) else exit_code_in(output, _EXIT_CODE)
    attrs: dict[str, Any] = {"gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id}
    if result.get("status") == "cancelled":  # executionStatus cancelled: it ran and was interrupted (Ctrl-C)
        interrupted = result.get("executionStatus") == "cancelled"
        attrs.update({"tool.result.status": "cancelled", "error.type": "interrupted" if interrupted else "cancelled"})
    elif result.get("status") == "error":
        _set_status(attrs, code, error or output or "error", output)
    else:
        _set_status(attrs, code, error, output)
    return [native_entry(record, "tool.result", time_ns, session, call_id, attrs)]


def _telemetry(record: RawRecord, data: dict[str, Any], session: str | None,
               time_ns: int | None) -> list[AgentActivityEntry]:
    payload = data.get("systemPayload")
    event = payload.get("uiEvent") if isinstance(payload, dict) else None
    if not isinstance(event, dict):
        return wrong_types(record, payload, {"uiEvent": dict}, "systemPayload.") if isinstance(payload, dict) \
            else wrong_types(record, data, {"systemPayload": dict})
    name = event.get("event.name")
    prompts = _turn_prompt(record, event, session)
    if name == "qwen-code.api_response":
        return prompts + _api_response(record, event, session, time_ns)
    if name == "qwen-code.api_error":
        attrs = {"gen_ai.turn.id": _turn_of(event.get("prompt_id")), "gen_ai.request.model": event.get("model"),
                 "error.type": str(event.get("error_type") or "api_error"),
                 "error.message": _as_text(event.get("error"))}
        return prompts + [native_entry(record, "error", time_ns, session, str(data.get("uuid")), attrs)]
    return prompts + wrong_types(record, event, {"event.name": str}, "uiEvent ")


def _main_prompt_id(data: dict[str, Any], session: str) -> str | None:
    """The main session's prompt id (``<session>########<n>``) a telemetry record carries, if any;
    sub-agents' prompt ids are other strings."""
    if data.get("subtype") != "ui_telemetry":
        return None
    payload = data.get("systemPayload")
    event = payload.get("uiEvent") if isinstance(payload, dict) else None
    prompt_id = event.get("prompt_id") if isinstance(event, dict) else None
    if isinstance(prompt_id, str) and prompt_id.startswith(session + "########"):
        return prompt_id
    return None


def _turn_prompt(record: RawRecord, event: dict[str, Any], session: str | None) -> list[AgentActivityEntry]:
    """The user.prompt of the turn this telemetry record belongs to, when it is the turn's first one:
    the nearest ``user`` record before it, unless a record with a main prompt id comes first."""
    prompt_id = event.get("prompt_id")
    path, offset = record.meta.get("path"), record.position
    if not session or not isinstance(prompt_id, str) or not prompt_id.startswith(session + "########"):
        return []
    if not isinstance(path, str) or not offset.isdigit():
        return []
    for data in lines_before(path, int(offset)):
        if data.get("sessionId") != session:
            continue
        if _main_prompt_id(data, session):
            return []  # not the turn's first telemetry record: that one reported the prompt
        if data.get("type") == "user" and not data.get("subtype"):
            return _user_prompt(record, data, session, prompt_id)
    return []


def _user_prompt(record: RawRecord, data: dict[str, Any], session: str, prompt_id: str) -> list[AgentActivityEntry]:
    text = text_of(message_parts(data.get("message")))
    if not text:
        return []
    attrs = {"gen_ai.turn.id": prompt_id, "gen_ai.input.messages": text_message("user", text)}
    return [native_entry(record, "user.prompt", iso_to_ns(data.get("timestamp")), session, prompt_id, attrs)]


def _api_response(record: RawRecord, event: dict[str, Any], session: str | None,
                  time_ns: int | None) -> list[AgentActivityEntry]:
    response_id = event.get("response_id")
    if not isinstance(response_id, str) or not response_id:
        return wrong_types(record, event, {"response_id": str}, "uiEvent ")
    text = event.get("response_text")
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.turn.id": _turn_of(event.get("prompt_id")),
        **_sub_prompt_scope(event.get("prompt_id"), session),
        "gen_ai.request.model": event.get("model"),
        "gen_ai.response.model": event.get("model"),
        "gen_ai.response.id": response_id,
        "duration_ms": event.get("duration_ms"),
        "gen_ai.output.messages": text_message("assistant", text) if isinstance(text, str) and text else None,
        **usage_attributes(
            as_int(event.get("input_token_count")),
            as_int(event.get("output_token_count")),
            as_int(event.get("cached_content_token_count")) or 0,
            0,
            as_int(event.get("thoughts_token_count")),
        ),
    }
    when = iso_to_ns(event.get("event.timestamp")) or time_ns
    return [native_entry(record, "llm.response", when, session, response_id, attrs)]


# -- helpers ---------------------------------------------------------------------------------------------


def _sub_prompt_scope(prompt_id: Any, session: str | None) -> dict[str, Any]:
    """A sub-agent's model call, logged in the main chat log: prompt id ``<session>#<agent id>#<n>``."""
    if not isinstance(prompt_id, str) or not session or "########" in prompt_id:
        return {}
    parts = prompt_id.split("#")
    if len(parts) != 3 or parts[0] != session or not parts[1]:
        return {}
    return _subagent_scope(parts[1], _agent_name(parts[1]))


def _set_status(attrs: dict[str, Any], exit_code: int | None, error: Any, output: Any) -> None:
    failed = bool(error) or exit_code not in (None, 0)
    attrs["tool.result.status"] = "error" if failed else "success"
    attrs["process.exit.code"] = exit_code
    if failed:
        attrs["error.type"] = "exit_code" if exit_code not in (None, 0) else "tool_error"
        attrs["error.message"] = _as_text(error) or _as_text(output)
    else:
        attrs["gen_ai.tool.call.result"] = output


def _as_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value or None
    if isinstance(value, dict):
        message = value.get("message")
        return message if isinstance(message, str) else None
    return None
