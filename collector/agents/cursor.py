"""Cursor: the agent's hook payloads (spool), from the flat hooks in ``~/.cursor/hooks.json``.

Cursor's hooks are the Claude Code protocol under camelCase names (``beforeSubmitPrompt``, ``preToolUse``,
``postToolUse``, ``postToolUseFailure``, ``sessionStart``, ``sessionEnd``, ``stop``, ...), so they are a
:class:`Dialect` of the family. Where Cursor differs (cursor.com/docs/hooks): the session is the
``conversation_id`` every payload carries, the turn the ``generation_id`` (one per prompt and its answer),
a tool result's ``tool_output`` is a JSON string and its time ``duration`` (milliseconds). Cursor cannot
run here, so what its payloads say beyond the documented fields is not assumed: ``afterAgentResponse``,
``afterAgentThought``, ``subagentStart``/``subagentStop`` and ``preCompact`` make no entry (the status
tracker reads them), and Cursor writes no token counts where a collector can read them.
"""

from __future__ import annotations

from typing import Any

from collector.agents.common import HookEnvelope
from collector.agents.families.claude_hooks import Dialect, HookProtocol, text_or_none, tool_failure
from collector.model import AgentActivityEntry, RawRecord

EVENTS = {
    "sessionStart": "SessionStart",
    "sessionEnd": "SessionEnd",
    "beforeSubmitPrompt": "UserPromptSubmit",
    "preToolUse": "PreToolUse",
    "postToolUse": "PostToolUse",
    "postToolUseFailure": "PostToolUseFailure",
    "stop": "Stop",
}
"""Cursor's event names -> the protocol's."""

_SILENT = frozenset({"afterAgentResponse", "afterAgentThought", "subagentStart", "subagentStop", "preCompact"})


def _duration(hook: HookEnvelope) -> Any:
    return hook.get("duration")


def _success(hook: HookEnvelope) -> dict[str, Any]:
    return {"tool.result.status": "success", "gen_ai.tool.call.result": hook.get("tool_output"),
            "duration_ms": _duration(hook)}


def _failure(hook: HookEnvelope) -> dict[str, Any]:
    return {**tool_failure(hook, hook.get("error_message")), "duration_ms": _duration(hook)}


_HOOKS = HookProtocol(Dialect(
    success=_success,
    failure=_failure,
    session_fields=("conversation_id", "session_id"),
    turn_field="generation_id",
    prompt_turn=text_or_none,
    prompt_key=text_or_none,
    tool_turn=text_or_none,
    times_tools=False,
    silent=_SILENT,
    aliases=EVENTS,
))


def parse(record: RawRecord) -> list[AgentActivityEntry]:
    return _HOOKS.parse(record)
