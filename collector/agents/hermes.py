"""Hermes Agent (Nous Research, PyPI ``hermes-agent``): rows of ``~/.hermes/state.db`` (SQLite, WAL).

- ``sessions`` row -> ``session.start`` (``cwd`` as the workspace, the model). A sub-agent's session
  (``source = 'subagent'``) is read as a session of its own, its parent named only in
  ``agent.hermes.parent_session_id``: no real sub-agent run is among the fixtures to prove the link.
- ``messages`` row: ``user`` -> ``user.prompt`` (its turn id is ``<session>#<message id>``); ``assistant``
  with ``tool_calls`` -> one ``tool.call`` per call; ``tool`` -> ``tool.result``. Hermes has no error flag
  on a result: a terminal result ``{"output", "exit_code", "error"}`` with a non-zero ``exit_code`` fails
  with ``error.type`` ``exit_code``, any result whose ``error`` is a non-empty string with ``tool_error``.
  Every row names the turn of the session's latest ``user`` message at or before it.
- ``session_model_usage`` row (one per session and model, its ``last_seen`` moves with every call) ->
  one ``llm.response`` per model call of that session and model in ``logs/agent.log``
  (:mod:`collector.agents.hermes_links`): Hermes's database keeps **session totals only**, its log one
  line per call with the prompt tokens (cached included), the cached and the completion tokens, exact.
  A call's id is its log line's time stamp and number, so a session that grows yields only its new
  calls, and a row read again yields nothing new. Cache writes and reasoning tokens are in the totals
  only (the log line has neither): each entry carries the row's totals apart, marked
  ``agent.hermes.usage_scope = "per_call"`` with ``agent.hermes.session_*`` (never summed: they are
  the session's, not the call's). When the log holds fewer calls than the row counts (a log cut by its
  size, or removed), the missing part is counted as unreadable ("agent.log lacks N of the session's
  model calls"), never made up.
"""

from __future__ import annotations

from typing import Any

import orjson

import collector.agents.hermes_links as hermes_links
from collector.agents.common import as_int, chat_response, native_entry, text_message, unreadable, usage_attributes
from collector.model import AgentActivityEntry, RawRecord
from collector.model.decode import loads_text

_TOTALS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
           "api_call_count")


def parse(record: RawRecord) -> list[AgentActivityEntry]:
    if record.kind != "sqlite":
        return []
    table, row = record.data.get("table"), record.data.get("row")
    if not isinstance(row, dict):
        return []
    session = row.get("session_id") if table != "sessions" else row.get("id")
    if not isinstance(session, str) or not session:
        return [unreadable(record, f"{table} row without a session id")]
    db = str(record.meta.get("path") or "")
    if table == "sessions":
        return _session(record, row, session)
    if table == "messages":
        return _message(record, row, session, db)
    if table == "session_model_usage":
        return _usage(record, row, session, db)
    return []


def _session(record: RawRecord, row: dict[str, Any], session: str) -> list[AgentActivityEntry]:
    attrs: dict[str, Any] = {"session.source": "startup", "workspace.path": _text(row.get("cwd")),
                             "gen_ai.request.model": _text(row.get("model"))}
    parent = _text(row.get("parent_session_id"))
    if parent:
        attrs["agent.hermes.parent_session_id"] = parent  # not linked as a sub-agent yet: no real run proves it
    return [native_entry(record, "session.start", _ns(row.get("started_at")), session, "start", attrs)]


def _message(record: RawRecord, row: dict[str, Any], session: str, db: str) -> list[AgentActivityEntry]:
    msg_id, role, at = as_int(row.get("id")), row.get("role"), _ns(row.get("timestamp"))
    if msg_id is None:
        return [unreadable(record, "messages row without an integer id")]
    if role == "user":
        content = row.get("content")
        attrs = {"gen_ai.turn.id": f"{session}#{msg_id}",
                 "gen_ai.input.messages": text_message("user", content) if isinstance(content, str) else None}
        return [native_entry(record, "user.prompt", at, session, f"msg:{msg_id}", attrs)]
    turn = hermes_links.turn_of(db, session, msg_id) if db else None
    turn_id = f"{session}#{turn}" if turn is not None else None
    if role == "assistant":
        return _calls(record, row.get("tool_calls"), session, at, turn_id)
    if role == "tool":
        return _result(record, row, session, at, turn_id)
    return []


def _calls(record: RawRecord, raw: Any, session: str, at: int | None,
           turn: str | None) -> list[AgentActivityEntry]:
    calls = _json(raw)
    if raw is not None and not isinstance(calls, list):
        return [unreadable(record, "messages.tool_calls is not a JSON array")]
    out = []
    for call in calls or []:
        fn = call.get("function") if isinstance(call, dict) else None
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(call_id, str) or not call_id:
            out.append(unreadable(record, "a tool call without an id or function"))
            continue
        args = fn.get("arguments")
        attrs = {"gen_ai.turn.id": turn, "gen_ai.tool.name": _text(fn.get("name")), "gen_ai.tool.call.id": call_id,
                 "gen_ai.tool.call.arguments": _json(args) if isinstance(args, str) else args}
        out.append(native_entry(record, "tool.call", at, session, call_id, attrs))
    return out


def _result(record: RawRecord, row: dict[str, Any], session: str, at: int | None,
            turn: str | None) -> list[AgentActivityEntry]:
    call_id, content = row.get("tool_call_id"), row.get("content")
    if not isinstance(call_id, str) or not call_id:
        return [unreadable(record, "a tool row without tool_call_id")]
    body = _json(content)
    body = body if isinstance(body, dict) else {}
    exit_code, error = as_int(body.get("exit_code")), body.get("error")
    attrs: dict[str, Any] = {"gen_ai.turn.id": turn, "gen_ai.tool.name": _text(row.get("tool_name")),
                             "gen_ai.tool.call.id": call_id, "process.exit.code": exit_code}
    if exit_code not in (None, 0) or isinstance(error, str) and error:
        attrs.update({"tool.result.status": "error",
                      "error.type": "exit_code" if exit_code not in (None, 0) else "tool_error",
                      "error.message": error if isinstance(error, str) and error else _text(body.get("output"))})
    else:
        attrs.update({"tool.result.status": "success", "gen_ai.tool.call.result": content})
    return [native_entry(record, "tool.result", at, session, call_id, attrs)]


def _usage(record: RawRecord, row: dict[str, Any], session: str, db: str) -> list[AgentActivityEntry]:
    model = _text(row.get("model"))
    calls = [c for c in hermes_links.api_calls(db, session) if c.model == model] if db and model else []
    totals = {f"agent.hermes.session_{k}": as_int(row.get(k)) for k in _TOTALS}
    out = []
    for call in calls:
        at = call.time_ns()
        turn = hermes_links.turn_before(db, session, at / 1e9) if at is not None else None
        attrs: dict[str, Any] = {
            **chat_response(call.model, None, None), "gen_ai.turn.id": f"{session}#{turn}" if turn else None,
            **usage_attributes(call.input_tokens, call.output_tokens, call.cached_tokens),
            "agent.hermes.usage_scope": "per_call", "agent.hermes.api_call_number": call.number, **totals,
        }
        out.append(native_entry(record, "llm.response", at, session, call.native_id, attrs))
    counted = as_int(row.get("api_call_count"))
    if counted is not None and counted > len(calls):
        out.append(unreadable(record, "agent.log lacks some of the session's model calls (totals only)"))
    return out


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return loads_text(value)
    except orjson.JSONDecodeError:
        return None


def _ns(value: Any) -> int | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e11:
        return int(value * 1_000_000_000)
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
