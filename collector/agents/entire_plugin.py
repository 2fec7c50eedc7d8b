"""Entire external agent plugins (collector.external): what a plugin said about the new part of one
session's transcript, as entries with ``gen_ai.agent.type`` = the plugin's name.

- ``session.start`` the first time a session file is seen.
- ``user.prompt`` per prompt of ``extract-prompts`` from the stored offset (its turn id is its own id; its
  id a digest of its text, shared with the same prompt from a TurnStart event).
- ``calculate-tokens`` is a total over the new part, not one record per model call: one ``llm.response``
  carrying the totals, marked ``agent.<plugin>.usage_scope = "transcript_total"`` with
  ``agent.<plugin>.api_call_count``; ``subagent_tokens`` make a second one with ``gen_ai.agent.scope =
  subagent``. Input tokens include the cache reads and writes (the protocol counts them apart).
- ``extract-modified-files`` becomes ``agent.<plugin>.modified_files`` on the turn: the last prompt of the
  part, else its totals.
- The protocol gives no time for prompts or totals: they carry the transcript's modification time when it
  was read, in order.

Ids come from the session and the plugin's opaque offset (prompts: their text), so a part read again
after a crash makes the same ids; a session's ``session.start`` has one id whichever input saw it first.

Hook records (``collector.external.hooks``: a hook payload the plugin's ``parse-hook`` made an Event of):
SessionStart -> ``session.start``, TurnStart -> ``user.prompt`` (its prompt; ``model`` as
``gen_ai.request.model``), Compaction -> ``compaction``, SessionEnd -> ``session.end``, SubagentStart /
SubagentEnd -> ``subagent.start`` / ``subagent.end`` (``subagent_type``, ``subagent_id``, ``tool_use_id``).
TurnEnd makes no entry: the agent's status rules make it the turn's end (``ready_for_review``). The
Event's free text besides the prompt (``task_description``, ``response_message``, ``tool_input``,
``metadata``) is not kept. An Event's id is a digest of the Event itself; its time is the Event's
``timestamp`` (RFC 3339), else when the hook was received."""

from __future__ import annotations

from typing import Any

from collector.agents.common import as_int, iso_to_ns, native_entry, payload_digest, text_message, usage_attributes
from collector.model import AgentActivityEntry, RawRecord


def parse(record: RawRecord) -> list[AgentActivityEntry]:
    if record.kind == "hook":
        return _event(record)
    if record.kind != "entire_session":
        return []
    data = record.data
    session = data.get("session_id") if isinstance(data.get("session_id"), str) else None
    at = int(data.get("mtime_ns") or record.observed_ns)
    offset = "0" if data.get("offset") is None else str(data["offset"])
    own = f"agent.{record.agent}."
    entries: list[AgentActivityEntry] = []
    if data.get("first"):
        attrs = {"session.source": "startup", "workspace.path": data.get("repo")}
        entries.append(native_entry(record, "session.start", at, session, "start", attrs))
    for n, text in enumerate(p for p in data.get("prompts") or [] if isinstance(p, str)):
        entry = native_entry(record, "user.prompt", at + n + 1, session, _prompt_id(text),
                             {"gen_ai.input.messages": text_message("user", text)})
        entry.attributes["gen_ai.turn.id"] = entry.id
        entries.append(entry)
    turn = entries[-1].attributes.get("gen_ai.turn.id") if entries and entries[-1].name == "user.prompt" else None
    totals = _totals(record, data.get("tokens"), session, at + len(entries) + 1, offset, turn, own)
    carrier = entries[-1] if turn else (totals[0] if totals else None)
    files = [f for f in data.get("files") or [] if isinstance(f, str)]
    if files and carrier is not None:
        carrier.attributes[own + "modified_files"] = files
    return entries + totals


def _totals(record: RawRecord, tokens: Any, session: str | None, at: int, offset: str, turn: str | None,
            own: str) -> list[AgentActivityEntry]:
    if not isinstance(tokens, dict):
        return []
    out = [_usage(record, tokens, session, at, f"tokens:{offset}", turn, own)]
    sub = tokens.get("subagent_tokens")
    if isinstance(sub, dict):
        entry = _usage(record, sub, session, at + 1, f"subagent-tokens:{offset}", turn, own)
        entry.attributes["gen_ai.agent.scope"] = "subagent"
        out.append(entry)
    return out


def _usage(record: RawRecord, tokens: dict[str, Any], session: str | None, at: int, native: str,
           turn: str | None, own: str) -> AgentActivityEntry:
    fresh, output = as_int(tokens.get("input_tokens")), as_int(tokens.get("output_tokens"))
    read, write = as_int(tokens.get("cache_read_tokens")) or 0, as_int(tokens.get("cache_creation_tokens")) or 0
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat", "gen_ai.turn.id": turn,
        own + "usage_scope": "transcript_total", own + "api_call_count": as_int(tokens.get("api_call_count")),
        **usage_attributes(None if fresh is None else fresh + read + write, output, read, write, None),
    }
    return native_entry(record, "llm.response", at, session, native, attrs)


_EVENT_NAMES = {"SessionStart": "session.start", "TurnStart": "user.prompt", "Compaction": "compaction",
                "SessionEnd": "session.end", "SubagentStart": "subagent.start", "SubagentEnd": "subagent.end"}


def _event(record: RawRecord) -> list[AgentActivityEntry]:
    kind, event = record.data.get("event"), record.data.get("payload")
    name = _EVENT_NAMES.get(str(kind))
    if name is None or not isinstance(event, dict) or not isinstance(event.get("session_id"), str):
        return []  # TurnEnd (status only), or not an Event
    session = event["session_id"]
    attrs: dict[str, Any] = {"agent.hook_event_name": kind}
    if name == "user.prompt" and isinstance(event.get("prompt"), str):
        attrs["gen_ai.input.messages"] = text_message("user", event["prompt"])
    if isinstance(event.get("model"), str) and event["model"]:
        attrs["gen_ai.request.model"] = event["model"]
    if name == "session.start":
        attrs["session.source"] = "resume" if event.get("previous_session_id") else "startup"
    if name.startswith("subagent."):
        attrs.update({"gen_ai.subagent.type": _text(event.get("subagent_type")),
                      "gen_ai.subagent.id": _text(event.get("subagent_id")),
                      "gen_ai.subagent.parent_tool_call.id": _text(event.get("tool_use_id"))})
    at = iso_to_ns(event.get("timestamp")) or iso_to_ns(record.data.get("ts"))
    native = {"session.start": "start", "user.prompt": _prompt_id(str(event.get("prompt") or ""))}.get(
        name, f"event:{payload_digest(event)}")
    entry = native_entry(record, name, at, session, native, attrs)
    if name == "user.prompt":
        entry.attributes["gen_ai.turn.id"] = entry.id
    return [entry]


def _prompt_id(text: str) -> str:
    """A prompt's id from its text, so the same prompt from extract-prompts and from a TurnStart event is one
    entry (the protocol gives a prompt no id of its own; the same text twice in a session is one entry)."""
    return f"prompt:{payload_digest(text)}"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
