"""What each status action (an agent's rule for a hook event, see ``status_rules``) does to a session.

A wait is cleared only by the result that matches it, so a parallel tool finishing cannot hide a pending
wait; the turn's end (Stop, a new prompt, the session's end) clears them all, because the agent cannot be
waiting any more. A permission request, which carries no id in Claude Code, is keyed by the id of the
matching PreToolUse, found by the tool's name and arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from collector.definitions.status_rules import (
    ACTIVITY,
    ASK,
    BLOCKED,
    ELICIT,
    END,
    FAIL,
    PERMISSION,
    PROMPT,
    RESOLVE,
    RESOLVE_ELICIT,
    SETTLE,
    START,
)
from collector.pipeline.status_signal import Signal
from collector.pipeline.status_state import CLOSED, ERROR, IDLE, READY, RUNNING, SessionState, Wait

_MAX_RECENT_TOOLS = 64  # PreToolUse calls remembered per session to pair permission requests


def _fingerprint(tool_name: str | None, facts: Mapping[str, Any]) -> str:
    """A tool call told by its tool and arguments: what pairs a permission request with its PreToolUse."""
    return f"{tool_name or ''}\x1f{facts.get('tool_args_digest') or ''}"


def _start(state: SessionState, signal: Signal) -> None:
    if signal.get("source") == "compact" and state.base is not None:
        return  # a compaction restart keeps the state
    state.base = IDLE
    state.waits.clear()


def _prompt(state: SessionState, signal: Signal) -> None:
    state.base = RUNNING
    state.waits.clear()


def _activity(state: SessionState, signal: Signal) -> None:
    if state.base != CLOSED:
        state.base = RUNNING
    call_id = signal.get("tool_call_id")
    if call_id:
        fingerprint = _fingerprint(signal.get("tool_name"), signal.facts)
        state.recent_tools[fingerprint] = call_id
        state.recent_tools.move_to_end(fingerprint)
        while len(state.recent_tools) > _MAX_RECENT_TOOLS:
            state.recent_tools.popitem(last=False)


def _ask(state: SessionState, signal: Signal) -> None:
    _activity(state, signal)
    key = signal.get("tool_call_id") or f"ask:{signal.trigger_id}"
    state.waits[key] = Wait("question", signal.time_ns, signal.get("tool_name"))


def _permission(state: SessionState, signal: Signal) -> None:
    if state.base != CLOSED:
        state.base = RUNNING
    key = signal.get("wait_id") or signal.get("tool_call_id")
    if key is None:  # Claude Code's PermissionRequest has no id: pair it with its PreToolUse
        fingerprint = _fingerprint(signal.get("tool_name"), signal.facts)
        key = state.recent_tools.get(fingerprint) or f"permission:{fingerprint}"
    state.waits[key] = Wait("permission", signal.time_ns, signal.get("tool_name"))


def _elicit(state: SessionState, signal: Signal) -> None:
    if state.base != CLOSED:
        state.base = RUNNING
    state.waits[_elicitation_key(signal)] = Wait("elicitation", signal.time_ns)


def _elicitation_key(signal: Signal) -> str:
    return f"elicitation:{signal.get('elicitation_id') or signal.get('mcp_server') or ''}"


def _blocked(state: SessionState, signal: Signal) -> None:
    # A notification only tells that the agent is blocked; when a keyed wait is already open it
    # adds nothing, otherwise it stands in until the next tool result or turn boundary.
    if not state.waits:
        state.waits[f"notification:{signal.get('notification_type')}"] = Wait("notification", signal.time_ns)


def _resolve(state: SessionState, signal: Signal) -> None:
    if state.base != CLOSED:
        state.base = RUNNING
    keys = {signal.get("wait_id"), signal.get("tool_call_id")}
    fingerprint = _fingerprint(signal.get("tool_name"), signal.facts)
    keys.add(f"permission:{fingerprint}")
    for key in [k for k in state.waits if k in keys or state.waits[k].kind == "notification"]:
        del state.waits[key]
    if signal.get("tool_call_id"):
        for fp in [fp for fp, cid in state.recent_tools.items() if cid == signal.get("tool_call_id")]:
            del state.recent_tools[fp]


def _resolve_elicit(state: SessionState, signal: Signal) -> None:
    if state.base != CLOSED:
        state.base = RUNNING
    state.waits.pop(_elicitation_key(signal), None)


def _end_turn(status: str) -> Callable[[SessionState, Signal], None]:
    def apply(state: SessionState, signal: Signal) -> None:
        state.base = status
        state.waits.clear()
        state.recent_tools.clear()

    return apply


# the actions of ``status_rules``, each what it does to the session's state
ACTIONS: dict[str, Callable[[SessionState, Signal], None]] = {
    START: _start,
    PROMPT: _prompt,
    ACTIVITY: _activity,
    ASK: _ask,
    PERMISSION: _permission,
    ELICIT: _elicit,
    BLOCKED: _blocked,
    RESOLVE: _resolve,
    RESOLVE_ELICIT: _resolve_elicit,
    SETTLE: _end_turn(READY),
    FAIL: _end_turn(ERROR),
    END: _end_turn(CLOSED),
}

