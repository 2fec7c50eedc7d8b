"""Kimi CLI (the Python ``kimi-cli``): its hook payloads (spool), from the flat ``[[hooks]]`` tables of
``~/.kimi/config.toml``.

Kimi copied the Claude Code hook protocol (event names and ``session_id``, ``cwd``, ``prompt``,
``tool_name``, ``tool_input``), so it is a :class:`Dialect` of the family. Where it differs: the tool call
id is ``tool_call_id`` (the model's own id); ``PostToolUse``'s ``tool_output`` is not JSON but the
Python repr of the tool's return value (``is_error=False output='hi\\n' message='...' display=[]
extras=None``), whose ``is_error`` says whether the tool failed (a command that exits non-zero is a
``PostToolUse`` with ``is_error=True``; ``PostToolUseFailure`` fires only when the tool raises, with
``error``); sub-agent events name the sub-agent's type in ``agent_name`` and carry no id; no payload
names the turn. The session's own files (``~/.kimi/sessions/``) are not read yet: model calls and
tokens are not collected from Kimi.
"""

from __future__ import annotations

import re
from typing import Any

from collector.agents.common import HookEnvelope
from collector.agents.families.claude_hooks import Dialect, HookProtocol, tool_failure
from collector.model import AgentActivityEntry, RawRecord

_IS_ERROR = re.compile(r"^is_error=(True|False)\b")
_MESSAGE = re.compile(r"\bmessage='((?:[^'\\]|\\.)*)'")


def _call_id(hook: HookEnvelope) -> Any:
    return hook.get("tool_call_id")


def _success(hook: HookEnvelope) -> dict[str, Any]:
    output = hook.get("tool_output")
    flag = _IS_ERROR.match(output) if isinstance(output, str) else None
    attrs: dict[str, Any] = {"gen_ai.tool.call.result": output}
    if flag is not None and flag.group(1) == "True":
        message = _MESSAGE.search(output)
        attrs.update({"tool.result.status": "error", "error.type": "tool_error",
                      "error.message": message.group(1) if message else None})
    else:
        attrs["tool.result.status"] = "success"
    return attrs


def _failure(hook: HookEnvelope) -> dict[str, Any]:
    error = hook.get("error")
    return tool_failure(hook, error if isinstance(error, str) else None)


def _subagent(hook: HookEnvelope) -> dict[str, Any]:
    return {"gen_ai.agent.scope": "subagent", "gen_ai.subagent.type": hook.get("agent_name")}


_HOOKS = HookProtocol(Dialect(
    success=_success,
    failure=_failure,
    call_id=_call_id,
    times_tools=False,
    subagent=_subagent,
))


def parse(record: RawRecord) -> list[AgentActivityEntry]:
    return _HOOKS.parse(record)
