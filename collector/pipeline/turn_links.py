"""Per-turn upstream spans from LoongSuite Pilot's correlation files, a step of the pipeline (with
``collector.upstream_trace_link`` on): a prompt whose text a caller announced gets that caller's span as
the parent of its turn.

A ``user.prompt`` entry of a turn not linked yet is matched against the unconsumed records of its
session's file (``collector.pipeline.correlation_files``), in Pilot's order of precedence: a ``turn``
record whose ``contentHash`` is the SHA-256 (lowercase hex) of the prompt's text, else one whose
``contentPrefix`` the text starts with, else the session's ``session`` record. Pilot's documentation
names the hash without naming its function; SHA-256 of the UTF-8 text is our reading. The record found
is consumed (it links no other turn) and the turn (its ``turn.key``) is linked: every entry of that turn
gets ``upstream.trace_id``/``upstream.parent_span_id`` of the record, in place of the ones the agent's
``TRACEPARENT`` gave the session (``collector.pipeline.invocation``), and ``upstream.correlation`` (the
record's type), so the trace exporter prefers them (``collector.exporters.trace_links``).

It runs after the turn step (the entry's ``turn.key``) and before the content policy, which drops the
text when capture is off: only the record's ids are kept, never the text or its hash. The state of a
session (the records consumed, the turns linked) is kept like the other steps' (the most recent sessions
in memory, the others in the checkpoint store), so a restart neither re-uses a consumed record nor
forgets a linked turn.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collector.pipeline.correlation_files import CorrelationFiles, Record
from collector.pipeline.invocation import PARENT_SPAN_ID, TRACE_ID
from collector.pipeline.session_cache import SessionCache

SOURCE = "upstream.correlation"  # "turn" or "session": the kind of record that linked the entry's turn
MAX_USED = 512  # consumed records remembered per session
MAX_TURNS = 64  # linked turns remembered per session


@dataclass(slots=True)
class _Session:
    used: list[str] = field(default_factory=list)  # idents of the records consumed
    turns: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # turn.key -> (trace, parent, kind)

    def encode(self) -> dict[str, Any]:
        return {"used": self.used, "turns": [[k, *v] for k, v in self.turns.items()]}


class TurnLinks:
    """Links turns to the records of ``files`` (see the module docstring); ``load``: one saved session by
    key (agent id and session id joined by U+001F), None when there is none."""

    def __init__(self, files: CorrelationFiles, max_sessions: int = 2000,
                 load: Callable[[str], Any] | None = None) -> None:
        self.files = files
        self.problems = files.problems  # what the files held that could not be used (status)
        self._sessions: SessionCache[_Session] = SessionCache(
            max_sessions, None if load is None else lambda key: decode(load(key)), keep_evicted=load is not None)

    def apply(self, entry: dict[str, Any]) -> None:
        session_id, turn = entry.get("gen_ai.session.id"), entry.get("turn.key")
        if not session_id or not isinstance(turn, str):
            return
        key = f"{entry.get('gen_ai.agent.type') or ''}\x1f{session_id}"
        state = self._sessions.get(key)
        if entry.get("event.name") == "user.prompt" and (state is None or turn not in state.turns):
            record = self._match(session_id, prompt_text(entry), state)
            if record is not None:
                if state is None:
                    state = _Session()
                    self._sessions.put(key, state)
                state.used = [*state.used, record.ident][-MAX_USED:]
                state.turns[turn] = (record.parent.trace_id, record.parent.parent_id, record.kind)
                while len(state.turns) > MAX_TURNS:
                    del state.turns[next(iter(state.turns))]
        link = state.turns.get(turn) if state is not None else None
        if link is not None:
            entry[TRACE_ID], entry[PARENT_SPAN_ID], entry[SOURCE] = link

    def _match(self, session_id: str, text: str | None, state: _Session | None) -> Record | None:
        records = self.files.records(session_id)
        if not records:
            return None
        used = set(state.used) if state is not None else set()
        free = [r for r in records if r.ident not in used]
        if text:
            texts = {text, text.strip()} - {""}
            hashes = {hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest() for t in texts}
            turns = [r for r in free if r.kind == "turn"]
            for record in turns:
                if record.content_hash and record.content_hash in hashes:
                    return record
            for record in turns:
                if record.content_prefix and any(t.startswith(record.content_prefix) for t in texts):
                    return record
        return next((r for r in free if r.kind == "session"), None)

    def changes(self) -> list[tuple[str, dict[str, Any]]]:
        """(key, state) of every session changed since the last call, to be saved."""
        return [(key, s.encode()) for key, s in self._sessions.drain()]


def prompt_text(entry: dict[str, Any]) -> str | None:
    """The user text of a prompt entry: the text parts of its ``gen_ai.input.messages`` (OpenTelemetry
    GenAI messages), joined by newlines; None when it has none."""
    messages = entry.get("gen_ai.input.messages")
    if isinstance(messages, str):
        return messages
    if not isinstance(messages, list):
        return None
    texts = []
    for message in messages:
        if not isinstance(message, dict) or message.get("role", "user") != "user":
            continue
        for part in message.get("parts") or ():
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("content"), str):
                texts.append(part["content"])
    return "\n".join(texts) if texts else None


def decode(raw: Any) -> _Session | None:
    """A saved session as :meth:`_Session.encode` wrote it; anything else is no state."""
    if not isinstance(raw, dict):
        return None
    used, turns = raw.get("used"), raw.get("turns")
    if not isinstance(used, list) or not isinstance(turns, list):
        return None
    state = _Session([u for u in used if isinstance(u, str)][-MAX_USED:])
    for item in turns[-MAX_TURNS:]:
        if isinstance(item, list) and len(item) == 4 and all(isinstance(v, str) for v in item):
            state.turns[item[0]] = (item[1], item[2], item[3])
    return state
