"""Codex CLI: hook payloads (spool; ``notify`` arrives as event ``notify``) and rollout files
(``${CODEX_HOME:-~/.codex}/sessions/YYYY/MM/DD/rollout-<ts>-<thread id>.jsonl``).

Which input is authoritative for what:

- Prompts: the ``UserPromptSubmit`` hook and the rollout's ``UserMessage`` item both carry Codex's
  ``turn_id``; both become the user.prompt with that id, so whichever is read first wins and the other is
  a duplicate.
- Tool calls and results: the rollout. Codex has no failure hook (a non-zero exit still fires
  ``PostToolUse`` with just the output), and the hook names the unified-exec tool ``Bash`` where the
  model (and the rollout) call it ``exec_command``. The rollout's ``function_call`` is written before the
  tool runs and its ``CommandExecution`` item holds ``status``/``exit_code``, so the rollout alone gives a
  complete, consistent pair whatever order the sources are read in. Tool hooks produce entries only when
  the hook names no rollout (``transcript_path`` empty, e.g. ``codex exec --ephemeral``).
- Tokens: one llm.response per model response. 0.169 writes ``token_usage_record`` (with
  ``response_id``) and repeats the same numbers in ``event_msg/token_count``; older versions write only
  ``token_count``. Both carry the thread's cumulative usage and the last response's usage, so the entry's
  id is made from those numbers: the pair describing one response gets one id (the first, the
  ``token_usage_record`` with its response id, is kept) and a ``token_count`` repeated without a new
  response dedupes too. OpenAI ``input_tokens`` already include cached tokens.

Rollout shapes handled (both proven by fixtures):

- current (0.169): ``response_item`` (message, function_call, custom_tool_call, *_output),
  ``event_msg/item_completed`` (UserMessage, AgentMessage, CommandExecution, FileChange),
  ``token_usage_record``, ``event_msg/token_count``.
- older (through the 0.4x-0.6x releases): ``event_msg/user_message`` {message, images},
  ``agent_message`` {message}, ``exec_command_begin``/``exec_command_end`` {call_id, command, cwd,
  stdout, stderr, aggregated_output, exit_code, duration, formatted_output}, ``patch_apply_end``
  {call_id, stdout, stderr, success}, ``token_count`` {info: {total_token_usage, last_token_usage,
  model_context_window}}. Field names are those of ``codex-rs/protocol/src/protocol.rs`` (EventMsg,
  ExecCommandEndEvent, PatchApplyEndEvent, TokenCountEvent, TokenUsage) in openai/codex. These records
  carry no turn id: a prompt's turn id is its position in the file.

Every rollout line lacks the session id; it is the thread id at the end of the file name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from collector.agents.codex_otel import CALL_KEYS, OTEL_KINDS, call_signature, parse_otel
from collector.agents.common import (
    HookEnvelope,
    as_int,
    iso_to_ns,
    json_or_value,
    native_entry,
    text_message,
    usage_attributes,
)
from collector.agents.families.claude_hooks import Dialect, HookProtocol, only_string
from collector.agents.lookbehind import lines_before
from collector.model import AgentActivityEntry, RawRecord

_THREAD_IN_NAME = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$")
_EXIT_IN_OUTPUT = re.compile(r"^(?:Process exited with code|Exit code:)\s*(-?\d+)\s*$", re.MULTILINE)
_ABORTED = re.compile(r"^aborted by user\s*$", re.MULTILINE)  # the output of a tool the user interrupted


def parse(record: RawRecord) -> list[AgentActivityEntry]:
    if record.kind == "transcript":
        return _parse_rollout(record)
    if record.kind in OTEL_KINDS:  # Codex's own telemetry (collector.agents.codex_otel)
        return parse_otel(record)
    return _HOOKS.parse(record)


# ---------------------------------------------------------------------------------------------- hooks


def _start_key(hook: HookEnvelope) -> str:
    """A new thread's start is also in its rollout (session_meta): both get the id "startup". Every
    resume sends the same payload (Codex adds no timestamp), so its id includes the receive time."""
    return "startup" if hook.get("source") == "startup" else f"start:{hook.time_ns}"


def _end_key(hook: HookEnvelope) -> str:
    """A SessionEnd's id is its receive time: its payload is the same for every end of the session."""
    return f"end:{hook.time_ns}"


def _without_rollout(hook: HookEnvelope) -> bool:
    """Tool hooks make entries only when the hook names no rollout: the rollout's function_call is the
    tool.call, and it knows the exit status where the hook does not."""
    return not hook.get("transcript_path")


def _success(hook: HookEnvelope) -> dict[str, Any]:
    """PostToolUse fires for failed commands too: the hook cannot tell a success."""
    return {"tool.result.status": "unknown", "gen_ai.tool.call.result": hook.get("tool_response")}


def _subagent(hook: HookEnvelope) -> dict[str, Any]:
    """A sub-agent event of Codex: the sub-agent and its turn (``turn_id``)."""
    return {"gen_ai.agent.scope": "subagent", "gen_ai.turn.id": hook.get("turn_id"),
            "gen_ai.subagent.type": hook.get("agent_type"), "gen_ai.agent.id": hook.get("agent_id")}


_HOOKS = HookProtocol(Dialect(
    success=_success, times_tools=False, describes_tool=_without_rollout, subagent=_subagent,
    session_fields=("session_id", "thread-id"), turn_field="turn_id", prompt_key=only_string,
    start_key=_start_key, end_key=_end_key,
    silent=frozenset({"notify", "Interrupt"}),
    lacks=frozenset({"PostToolUseFailure", "PermissionDenied"}),  # no failure or denial hook
))

# -------------------------------------------------------------------------------------------- rollout


def _thread_of(record: RawRecord) -> str | None:
    return _thread_in_name(str(record.meta.get("path", "")))


@functools.lru_cache(maxsize=1024)
def _thread_in_name(path: str) -> str | None:
    """The thread id a rollout file's name ends with (once per file: the search ran for every line)."""
    match = _THREAD_IN_NAME.search(path)
    return match.group(1) if match else None


def _parse_rollout(record: RawRecord) -> list[AgentActivityEntry]:
    data = record.data
    payload = data.get("payload")
    if not isinstance(payload, dict):  # none: a line of the older layout (another type: the definition's
        return []                      # field_types count it before the parser)
    kind = data.get("type")
    session = _thread_of(record) or _str(payload.get("thread_id")) or _str(payload.get("session_id"))
    line = _Line(record, session, iso_to_ns(data.get("timestamp")), payload)
    if kind == "session_meta":
        return _session_meta(line)
    if kind == "token_usage_record":
        return _usage_record(line)
    if kind == "response_item":
        handler = _RESPONSE_ITEMS.get(str(payload.get("type")))
    elif kind == "event_msg":
        handler = _EVENTS.get(str(payload.get("type")))
    elif kind == "compacted":
        handler = _compacted
    else:
        handler = None
    return handler(line) if handler else []


class _Line:
    """One rollout line with what every handler needs."""

    __slots__ = ("payload", "record", "session", "time_ns")

    def __init__(self, record: RawRecord, session: str | None, time_ns: int | None, payload: dict[str, Any]):
        self.record = record
        self.session = session
        self.time_ns = time_ns
        self.payload = payload

    def entry(self, name: str, native_id: str, attrs: dict[str, Any],
              time_ns: int | None = None) -> AgentActivityEntry:
        return native_entry(self.record, name, time_ns or self.time_ns, self.session, native_id, attrs)

    @property
    def turn(self) -> str | None:
        turn = self.payload.get("turn_id")
        if not isinstance(turn, str):
            meta = self.payload.get("internal_chat_message_metadata_passthrough")
            turn = meta.get("turn_id") if isinstance(meta, dict) else None
        return turn if isinstance(turn, str) and turn else None


Handler = Callable[[_Line], list[AgentActivityEntry]]


def _of_call(handler: Callable[[_Line, str], list[AgentActivityEntry]]) -> Handler:
    """A handler of a line about one tool call, given its ``call_id``: a line that names none makes nothing."""
    def handle(line: _Line) -> list[AgentActivityEntry]:
        call_id = _str(line.payload.get("call_id"))
        return handler(line, call_id) if call_id else []
    return handle


def _session_meta(line: _Line) -> list[AgentActivityEntry]:
    p = line.payload
    attrs = {"session.source": "startup", "workspace.path": _str(p.get("cwd")),
             "agent.version": _str(p.get("cli_version")), "agent.originator": _str(p.get("originator"))}
    return [line.entry("session.start", "startup", attrs, iso_to_ns(p.get("timestamp")))]


# -- tokens --------------------------------------------------------------------------------------------


def _usage_record(line: _Line) -> list[AgentActivityEntry]:
    p = line.payload
    last, total = p.get("usage"), p.get("thread_token_usage")
    extra = {"gen_ai.response.id": _str(p.get("response_id")), "gen_ai.turn.id": line.turn}
    return _llm_response(line, last, total, extra)


def _token_count(line: _Line) -> list[AgentActivityEntry]:
    info = line.payload.get("info")
    if not isinstance(info, dict):
        return []  # rate-limit only update
    return _llm_response(line, info.get("last_token_usage"), info.get("total_token_usage"), {})


def _model_before(line: _Line) -> str | None:
    """The model of the turn a token line belongs to: no token line names it, the nearest earlier
    ``turn_context`` does (``"model": "gpt-5.5"``; a ``/model`` switch writes a new one). The rollout is
    append-only, so the answer is the same on every read."""
    path, offset = line.record.meta.get("path"), line.record.position
    if not isinstance(path, str) or not offset.isdigit():
        return None
    for data in lines_before(path, int(offset)):
        if data.get("type") == "turn_context":
            payload = data.get("payload")
            return _str(payload.get("model")) if isinstance(payload, dict) else None
    return None


def _llm_response(line: _Line, last: Any, total: Any, extra: dict[str, Any]) -> list[AgentActivityEntry]:
    if not isinstance(last, dict) or not isinstance(total, dict) or not as_int(last.get("total_tokens")):
        return []
    fields = ("total_tokens", "input_tokens", "output_tokens")
    key = "usage:" + ":".join(str(as_int(u.get(f))) for u in (total, last) for f in fields)
    model = _model_before(line)
    sig = call_signature(line.session, model, last.get("input_tokens"), last.get("cached_input_tokens"),
                         last.get("cache_write_input_tokens"))  # the key its telemetry's event shares
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,  # what Codex asked for; it records no response model
        CALL_KEYS: [sig] if sig else None,
        **extra,
        **usage_attributes(
            as_int(last.get("input_tokens")),
            as_int(last.get("output_tokens")),
            as_int(last.get("cached_input_tokens")) or 0,
            as_int(last.get("cache_write_input_tokens")) or 0,
            as_int(last.get("reasoning_output_tokens")),
        ),
    }
    return [line.entry("llm.response", key, attrs)]


# -- response items --------------------------------------------------------------------------------------


@_of_call
def _function_call(line: _Line, call_id: str) -> list[AgentActivityEntry]:
    p = line.payload
    if p.get("type") == "custom_tool_call":
        arguments: Any = p.get("input")
    elif p.get("type") == "local_shell_call":
        arguments = p.get("action")
    else:
        arguments = json_or_value(p.get("arguments"))
    name = p.get("name") or ("local_shell" if p.get("type") == "local_shell_call" else None)
    attrs = {"gen_ai.turn.id": line.turn, "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id,
             "gen_ai.tool.call.arguments": arguments}
    return [line.entry("tool.call", call_id, attrs)]


@_of_call
def _function_output(line: _Line, call_id: str) -> list[AgentActivityEntry]:
    """A tool's output as the model got it. For shell commands the CommandExecution item (or the older
    exec_command_end) comes first and wins; this is the result for every other tool, and the status it
    gives a shell command agrees with theirs (the output header holds the exit code)."""
    output = line.payload.get("output")
    if isinstance(output, str) and _ABORTED.search(output[:2000]):
        return [_interrupted(line, call_id, output, None, None)]
    exit_code = _exit_code_of(output)
    return [_tool_result(line, call_id, exit_code not in (None, 0), exit_code, output, None)]


def _interrupted(line: _Line, call_id: str, output: Any, duration_ms: float | None,
                 time_ns: int | None) -> AgentActivityEntry:
    """A tool the user interrupted (Ctrl-C, ``turn_aborted``): its output says ``aborted by user`` and
    its CommandExecution item has no exit code (``-1``). Never a success."""
    attrs: dict[str, Any] = {
        "gen_ai.turn.id": line.turn,
        "gen_ai.tool.call.id": call_id,
        "tool.result.status": "cancelled",
        "error.type": "interrupted",
        "error.message": output if isinstance(output, str) and output else "aborted by user",
        "duration_ms": duration_ms,
    }
    return line.entry("tool.result", call_id, attrs, time_ns)


def _exit_code_of(output: Any) -> int | None:
    if isinstance(output, str):
        match = _EXIT_IN_OUTPUT.search(output[:2000].split("\nOutput:", 1)[0])
        if match:
            return int(match.group(1))
        decoded = json_or_value(output)
        if isinstance(decoded, dict):  # 0.2x-0.4x shell tool: {"output": ..., "metadata": {"exit_code": n}}
            meta = decoded.get("metadata")
            return as_int(meta.get("exit_code")) if isinstance(meta, dict) else None
    return None


def _tool_result(
    line: _Line, call_id: str, failed: bool, exit_code: int | None, result: Any, duration_ms: float | None,
    time_ns: int | None = None,
) -> AgentActivityEntry:
    attrs: dict[str, Any] = {
        "gen_ai.turn.id": line.turn,
        "gen_ai.tool.call.id": call_id,
        "tool.result.status": "error" if failed else "success",
        "duration_ms": duration_ms,
        "process.exit.code": exit_code,
    }
    if failed:
        attrs["error.type"] = "exit_code" if exit_code not in (None, 0) else "tool_error"
        attrs["error.message"] = result if isinstance(result, str) else None
    else:
        attrs["gen_ai.tool.call.result"] = result
    return line.entry("tool.result", call_id, attrs, time_ns)


# -- events ----------------------------------------------------------------------------------------------


def _item_completed(line: _Line) -> list[AgentActivityEntry]:
    item = line.payload.get("item")
    if not isinstance(item, dict):
        return []
    kind = item.get("type")
    done_ns = iso_to_ns(line.payload.get("completed_at_ms"))
    if kind == "UserMessage":
        return _prompt_entry(line, _item_text(item.get("content")), line.turn)
    if kind == "CommandExecution":
        exit_code = as_int(item.get("exit_code"))
        failed = item.get("status") == "failed" or exit_code not in (None, 0)
        duration = _duration_ms(item.get("duration"))
        if failed and exit_code == -1:  # killed before it exited: the user interrupted the turn
            return [_interrupted(line, str(item.get("id")), item.get("aggregated_output"), duration, done_ns)]
        return [_tool_result(line, str(item.get("id")), failed, exit_code, item.get("aggregated_output"),
                             duration, done_ns)]
    if kind == "FileChange":
        failed = item.get("status") not in ("completed", None)
        output = item.get("stderr") if failed else item.get("stdout")
        return [_tool_result(line, str(item.get("id")), failed, None, output, None, done_ns)]
    return []


def _user_message(line: _Line) -> list[AgentActivityEntry]:
    """Older rollouts: ``event_msg/user_message``. Early versions also logged instructions and
    environment context this way, with a ``kind`` other than ``plain``."""
    p = line.payload
    if p.get("kind") not in (None, "plain"):
        return []
    turn = line.turn or f"prompt@{line.record.position}"
    return _prompt_entry(line, _str(p.get("message")) or "", turn)


def _prompt_entry(line: _Line, text: str, turn: str | None) -> list[AgentActivityEntry]:
    if not turn:
        return []
    attrs = {"gen_ai.turn.id": turn, "gen_ai.input.messages": text_message("user", text)}
    return [line.entry("user.prompt", turn, attrs)]


@_of_call
def _exec_end(line: _Line, call_id: str) -> list[AgentActivityEntry]:
    p = line.payload
    exit_code = as_int(p.get("exit_code"))
    output = p.get("aggregated_output") or p.get("formatted_output") or p.get("stdout")
    return [_tool_result(line, call_id, exit_code not in (None, 0), exit_code, output,
                         _duration_ms(p.get("duration")))]


@_of_call
def _patch_end(line: _Line, call_id: str) -> list[AgentActivityEntry]:
    p = line.payload
    failed = p.get("success") is False
    return [_tool_result(line, call_id, failed, None, p.get("stderr") if failed else p.get("stdout"), None)]


def _error(line: _Line) -> list[AgentActivityEntry]:
    message = _str(line.payload.get("message"))
    attrs = {"gen_ai.turn.id": line.turn, "error.type": "api_error", "error.message": message}
    return [line.entry("error", f"error@{line.record.position}", attrs)]


def _compacted(line: _Line) -> list[AgentActivityEntry]:
    return [line.entry("compaction", f"compacted@{line.record.position}", {"gen_ai.turn.id": line.turn})]


_RESPONSE_ITEMS: dict[str, Handler] = {
    "function_call": _function_call,
    "custom_tool_call": _function_call,
    "local_shell_call": _function_call,
    "function_call_output": _function_output,
    "custom_tool_call_output": _function_output,
}
_EVENTS: dict[str, Handler] = {
    "item_completed": _item_completed,
    "token_count": _token_count,
    "user_message": _user_message,
    "exec_command_end": _exec_end,
    "patch_apply_end": _patch_end,
    "error": _error,
}

# -- small helpers ---------------------------------------------------------------------------------------


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _item_text(content: Any) -> str:
    if not isinstance(content, list):
        return ""
    parts = [c.get("text", "") for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)]
    return "\n".join(parts)


def _duration_ms(duration: Any) -> float | None:
    """Rust ``Duration`` as serde writes it: ``{secs, nanos}``."""
    if isinstance(duration, dict):
        secs, nanos = as_int(duration.get("secs")) or 0, as_int(duration.get("nanos")) or 0
        return round(secs * 1000 + nanos / 1_000_000, 3)
    return None
