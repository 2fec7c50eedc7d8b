"""Mistral Vibe (PyPI ``mistral-vibe``, 3.0.x): its event-sourced session store under
``~/.vibe/logs/session/unified/<session id>/`` (``$VIBE_HOME`` moves ``~/.vibe``).

- ``journal/<first sequence>.jsonl``: the recovery journal, one ``{type, sequence, payload, ...}`` per
  line. Only ``core_input`` lines are read: they are the inputs of Vibe's state machine, each with its
  time (``payload.input.determinism.time_unix_ms``) and one command (``payload.input.command``):

  - ``user_message``: user.prompt; its ``turn_id`` (``turn-<hex>``) is the turn id and the entry's id.
  - ``completion_succeeded``: llm.response for one model call (id: Vibe's ``action_id``; the provider's
    response id is not stored), ``result.usage{input_tokens, cached_input_tokens, output_tokens}``:
    ``input_tokens`` already includes the cached ones; no cache writes or reasoning tokens are reported.
    A ``tool_call`` part (``{id, name, arguments_json}``) is a tool.call.
  - ``tool_succeeded``: tool.result (``call_id``). bash reports a failing command as a success with
    ``structured_content.returncode`` beside it: a non-zero code is an error (``exit_code``).
  - ``tool_failed`` (read_file of a missing file) and any other ``tool_*`` outcome: an error named by its
    type, with ``result.error.message``.
  - other commands (hook completions, ...): nothing.

  No line names the session: it is the folder the journal is in. Vibe deletes older journal segments
  when it writes a new snapshot (it keeps the two newest), so a turn's per-call usage is on disk only
  until a later checkpoint: the daemon reads it live; a later backfill sees only the last segments.
- ``meta.json`` (root sessions only): session.start (``start_time``, the working directory, the model name).

Our hooks (``~/.vibe/hooks.toml``: ``pre_tool``, ``post_tool``, ``post_agent``) make no entries: they drive
the live status (the definition's ``status``). They carry no tokens, and ``post_tool``'s ``tool_status`` is
the runtime's (a failing bash command is a success there), so the journal alone makes the tool entries. No
line or hook says a session ended (``end_time`` in ``meta.json`` is rewritten by every run): the idle rule
closes it.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from collector.agents.common import (
    as_int,
    chat_response,
    iso_to_ns,
    json_or_value,
    native_entry,
    text_message,
    usage_attributes,
    wrong_types,
)
from collector.model import AgentActivityEntry, RawRecord


def parse(record: RawRecord) -> list[AgentActivityEntry]:
    if record.kind == "hook":  # pre_tool, post_tool, post_agent: the status tracker reads them
        return []
    if record.kind == "json_file":
        return _meta(record, record.data)
    if record.data.get("type") != "core_input":
        return []
    return _core_input(record, _journal_session(record.meta.get("path")))


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _journal_session(path: Any) -> str | None:
    """``.../unified/<session id>/journal/<sequence>.jsonl`` -> the session id."""
    if not isinstance(path, str):
        return None
    folder = PurePath(path).parent
    return folder.parent.name or None if folder.name == "journal" else None


# ---------------------------------------------------------------------------------------------- journal


def _core_input(record: RawRecord, session: str | None) -> list[AgentActivityEntry]:
    payload = _obj(record.data.get("payload"))
    inputs = _obj(payload.get("input"))
    command = _obj(inputs.get("command"))
    problems = wrong_types(record, payload, {"input": dict}, "core_input payload ")
    problems += wrong_types(record, inputs, {"command": dict, "determinism": dict}, "core_input ")
    if problems:
        return problems
    kind = command.get("type")
    stamp = iso_to_ns(as_int(_obj(inputs.get("determinism")).get("time_unix_ms")))
    if kind == "user_message":
        return _prompt(record, command, stamp, session)
    if kind == "completion_succeeded":
        return _completion(record, command, stamp, session)
    if isinstance(kind, str) and kind.startswith("tool_"):
        return _tool_result(record, command, kind, stamp, session)
    return wrong_types(record, command, {"type": str}, "core_input command ")


def _text(content: Any) -> str:
    if not isinstance(content, list):
        return ""
    return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))


def _prompt(record: RawRecord, command: dict[str, Any], stamp: int | None,
            session: str | None) -> list[AgentActivityEntry]:
    turn = command.get("turn_id")
    if not isinstance(turn, str) or not turn:
        return wrong_types(record, command, {"turn_id": str}, "user_message ")
    text = _text(command.get("content"))
    attrs = {"gen_ai.turn.id": turn, "gen_ai.input.messages": text_message("user", text) if text else None}
    return [native_entry(record, "user.prompt", stamp, session, turn, attrs)]


def _completion(record: RawRecord, command: dict[str, Any], stamp: int | None,
                session: str | None) -> list[AgentActivityEntry]:
    action = command.get("action_id")
    result = command.get("result")
    if not isinstance(action, str) or not action or not isinstance(result, dict):
        return wrong_types(record, command, {"action_id": str, "result": dict}, "completion ")
    usage = _obj(result.get("usage"))
    parts = result.get("parts")
    parts = parts if isinstance(parts, list) else []
    text = "\n".join(p["text"] for p in parts
                     if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))
    attrs = {
        **chat_response(None, None, result.get("finish_reason")),
        "gen_ai.output.messages": text_message("assistant", text) if text else None,
        **usage_attributes(as_int(usage.get("input_tokens")), as_int(usage.get("output_tokens")),
                           as_int(usage.get("cached_input_tokens"))),
    }
    entries = [native_entry(record, "llm.response", stamp, session, action, attrs)]
    entries += wrong_types(record, result, {"usage": dict, "parts": list}, "completion result ")
    for part in parts:
        entries += _tool_call(record, part, stamp, session)
    return entries


def _tool_call(record: RawRecord, part: Any, stamp: int | None, session: str | None) -> list[AgentActivityEntry]:
    if not isinstance(part, dict):
        return wrong_types(record, {"parts[]": part}, {"parts[]": dict}, "completion result ")
    if part.get("type") != "tool_call":
        return wrong_types(record, part, {"type": str}, "completion result parts[] ")
    call_id = part.get("id")
    if not isinstance(call_id, str) or not call_id:
        return wrong_types(record, part, {"id": str}, "tool_call part ")
    attrs = {"gen_ai.tool.name": part.get("name"), "gen_ai.tool.call.id": call_id,
             "gen_ai.tool.call.arguments": json_or_value(part.get("arguments_json"))}
    return [native_entry(record, "tool.call", stamp, session, call_id, attrs)]


def _tool_result(record: RawRecord, command: dict[str, Any], kind: str, stamp: int | None,
                 session: str | None) -> list[AgentActivityEntry]:
    call_id = command.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        return wrong_types(record, command, {"call_id": str}, f"{kind} ")
    result = _obj(command.get("result"))
    output = result.get("structured_content")
    code = as_int(_obj(output).get("returncode"))
    attrs: dict[str, Any] = {"gen_ai.tool.call.id": call_id, "process.exit.code": code}
    if kind == "tool_succeeded" and code in (None, 0):
        attrs.update({"tool.result.status": "success", "gen_ai.tool.call.result": output})
    elif kind == "tool_succeeded":
        attrs.update({"tool.result.status": "error", "error.type": "exit_code",
                      "gen_ai.tool.call.result": output})
    else:
        error = _obj(result.get("error")).get("message")
        attrs.update({"tool.result.status": "error", "error.type": kind,
                      "error.message": error if isinstance(error, str) else None})
    return [native_entry(record, "tool.result", stamp, session, call_id, attrs)]


# ------------------------------------------------------------------------------------------- meta.json


def _meta(record: RawRecord, data: dict[str, Any]) -> list[AgentActivityEntry]:
    session = data.get("session_id")
    if not isinstance(session, str) or not session:
        return wrong_types(record, data, {"session_id": str}, "meta.json ")
    parent = data.get("parent_session_id")
    attrs = {
        "session.source": "startup",
        "workspace.path": _obj(data.get("environment")).get("working_directory"),
        "agent.model": _obj(data.get("config")).get("model_name"),
        "gen_ai.session.parent.id": parent if isinstance(parent, str) and parent else None,
    }
    return [native_entry(record, "session.start", iso_to_ns(data.get("start_time")), session, "start", attrs)]
