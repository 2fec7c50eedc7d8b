"""Turn one user turn's entries into span data, following the OpenTelemetry GenAI conventions (v1.41).

Pure: no I/O, no clock. The shape::

    invoke_agent {agent}          INTERNAL  one per turn (root), gen_ai.conversation.id = session id
    ├─ chat {model}               CLIENT    one per model call (llm.request + llm.response); tokens only here
    └─ execute_tool {tool}        INTERNAL  one per tool call (tool.call + tool.result)
       └─ invoke_agent {type}     INTERNAL  a subagent started by that tool call
          ├─ chat {model}
          └─ execute_tool {tool}

Ids are deterministic: the trace id hashes agent + session + turn, span ids hash the native ids (tool call
id, response id) or the entry's ``event.id``, so rebuilding a turn after a crash yields the same spans.
Span times come from the entries' ``time_unix_nano``; a model call without a request entry starts at
``response time - duration_ms``.

Upstream trace linking: when the turn's entries carry ``upstream.trace_id`` and ``upstream.parent_span_id``
(the pipeline stamps them on a session started with ``TRACEPARENT`` when ``collector.upstream_trace_link`` is
on, ``collector.pipeline.invocation``), the turn's spans are in that trace and the root's parent is that
span (a remote parent). Custom attributes the pipeline stamped are on every span (``trace_links``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from collector.exporters.trace_links import custom_of, upstream_of

Entry = Mapping[str, Any]
AttrValue = str | bool | int | float | list[str] | list[int] | list[float] | list[bool]

INTERNAL = "INTERNAL"
CLIENT = "CLIENT"

# token fields of an llm.response -> span attribute names (semconv); only chat spans carry them
TOKEN_ATTRIBUTES = {
    "gen_ai.usage.input_tokens": "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens": "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens": "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens": "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
}
_CHAT_FIELDS = (
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.response.id",
    "gen_ai.request.id",
    "gen_ai.response.finish_reasons",
    "error.type",
)


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: dict[str, AttrValue] = field(default_factory=dict)


@dataclass(slots=True)
class SpanData:
    """What an OTLP span needs; ``otlp_traces`` turns it into an SDK ``ReadableSpan``."""

    name: str
    kind: str
    trace_id: int
    span_id: int
    parent_id: int | None
    start_ns: int
    end_ns: int
    attributes: dict[str, AttrValue]
    status: str = "UNSET"  # UNSET | OK | ERROR
    status_message: str | None = None
    events: list[SpanEvent] = field(default_factory=list)
    parent_remote: bool = False  # the parent is another process's span (upstream trace linking)

    def to_json(self) -> dict[str, Any]:
        return {
            **({"parent_remote": True} if self.parent_remote else {}),
            "name": self.name,
            "kind": self.kind,
            "trace_id": f"{self.trace_id:032x}",
            "span_id": f"{self.span_id:016x}",
            "parent_id": None if self.parent_id is None else f"{self.parent_id:016x}",
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "attributes": self.attributes,
            "status": self.status,
            "status_message": self.status_message,
            "events": [[e.name, e.time_ns, e.attributes] for e in self.events],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SpanData:
        return cls(
            name=data["name"],
            kind=data["kind"],
            trace_id=int(data["trace_id"], 16),
            span_id=int(data["span_id"], 16),
            parent_id=None if data.get("parent_id") is None else int(data["parent_id"], 16),
            start_ns=int(data["start_ns"]),
            end_ns=int(data["end_ns"]),
            attributes=dict(data.get("attributes") or {}),
            status=data.get("status", "UNSET"),
            status_message=data.get("status_message"),
            events=[SpanEvent(n, int(t), dict(a)) for n, t, a in data.get("events") or []],
            parent_remote=data.get("parent_remote") is True,
        )


@dataclass(slots=True)
class TurnInput:
    """One turn: its identity, its entries (any order), and how it ended."""

    agent: str
    session: str
    key: str
    entries: Sequence[Entry]
    complete: bool = True
    include_root: bool = True  # False: entries that arrived after their turn was sent (no new root)


# -- ids ---------------------------------------------------------------------------------------------------
def _hash_id(bits: int, *parts: object) -> int:
    digest = hashlib.sha256("\x1f".join("" if p is None else str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[: bits // 8], "big") or 1


def trace_id_for(agent: str, session: str, turn_key: str) -> int:
    return _hash_id(128, "trace", agent, session, turn_key)


def root_span_id(agent: str, session: str, turn_key: str) -> int:
    return _hash_id(64, "invoke_agent", agent, session, turn_key)


def tool_span_id(agent: str, session: str, call_key: str) -> int:
    return _hash_id(64, "execute_tool", agent, session, call_key)


def subagent_span_id(agent: str, session: str, parent_call_id: str) -> int:
    return _hash_id(64, "subagent", agent, session, parent_call_id)


def chat_span_id(agent: str, session: str, call_key: str) -> int:
    return _hash_id(64, "chat", agent, session, call_key)


# -- small helpers -------------------------------------------------------------------------------------
def _t(entry: Entry) -> int:
    return int(entry.get("time_unix_nano") or 0)


def _name(entry: Entry) -> str:
    return str(entry.get("event.name", ""))


def attr_value(value: Any) -> AttrValue | None:
    """An OTel attribute value: primitives and homogeneous lists as they are, anything else as JSON."""
    if value is None:
        return None
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value)
    if isinstance(value, list) and not value:
        return None
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _put(attrs: dict[str, AttrValue], key: str, value: Any) -> None:
    converted = attr_value(value)
    if converted is not None:
        attrs[key] = converted


def _content(attrs: dict[str, AttrValue], entry: Entry, fields: Iterable[str]) -> None:
    """Copy content fields as the policy left them: the content itself, or only its length and hash."""
    for key in fields:
        _put(attrs, key, entry.get(key))
        _put(attrs, f"{key}.length", entry.get(f"{key}.length"))
        _put(attrs, f"{key}.hmac", entry.get(f"{key}.hmac"))


def _parent_call(entry: Entry) -> str | None:
    if entry.get("gen_ai.agent.scope") == "subagent" or _name(entry).startswith("subagent."):
        parent = entry.get("gen_ai.subagent.parent_tool_call.id")
        return str(parent) if parent else None
    return None


# -- the builder ---------------------------------------------------------------------------------------
class _Builder:
    def __init__(self, turn: TurnInput) -> None:
        self.turn = turn
        self.entries = sorted(turn.entries, key=_t)
        self.upstream = upstream_of(self.entries)
        self.trace_id = self.upstream[0] if self.upstream else trace_id_for(turn.agent, turn.session, turn.key)
        self.root_id = root_span_id(turn.agent, turn.session, turn.key)
        self.spans: list[SpanData] = []
        self.tool_spans: dict[str, SpanData] = {}
        self.subagents: dict[str, SpanData] = {}
        self.common: dict[str, AttrValue] = {"gen_ai.conversation.id": turn.session}
        for key, value in custom_of(self.entries).items():  # the custom attributes, on every span
            _put(self.common, key, value)
        self.last_ns = max((_t(e) for e in self.entries), default=0)

    def _parent_for(self, entry: Entry) -> int:
        parent_call = _parent_call(entry)
        if parent_call is None:
            return self.root_id
        return self._subagent(parent_call, entry).span_id

    def _subagent(self, parent_call: str, entry: Entry) -> SpanData:
        span = self.subagents.get(parent_call)
        if span is None:
            kind = entry.get("gen_ai.subagent.type")
            attrs: dict[str, AttrValue] = {
                **self.common,
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": str(kind or "subagent"),
                "gen_ai.subagent.parent_tool_call.id": parent_call,
            }
            _put(attrs, "gen_ai.subagent.type", kind)
            span = SpanData(
                name=f"invoke_agent {kind or 'subagent'}",
                kind=INTERNAL,
                trace_id=self.trace_id,
                span_id=subagent_span_id(self.turn.agent, self.turn.session, parent_call),
                parent_id=tool_span_id(self.turn.agent, self.turn.session, parent_call),
                start_ns=_t(entry),
                end_ns=_t(entry),
                attributes=attrs,
            )
            self.subagents[parent_call] = span
        elif "gen_ai.subagent.type" not in span.attributes and entry.get("gen_ai.subagent.type"):
            kind = str(entry["gen_ai.subagent.type"])
            span.attributes["gen_ai.subagent.type"] = kind
            span.attributes["gen_ai.agent.name"] = kind
            span.name = f"invoke_agent {kind}"
        return span

    # chat spans ---------------------------------------------------------------------------------------
    def build_chats(self) -> None:
        requests = [e for e in self.entries if _name(e) == "llm.request"]
        used: set[int] = set()
        responses: dict[str, list[Entry]] = {}
        for entry in self.entries:
            if _name(entry) == "llm.response":
                key = str(entry.get("gen_ai.response.id") or entry.get("event.id"))
                responses.setdefault(key, []).append(entry)
        for key, parts in responses.items():
            # a correction (docs/merge.md) is the call with its exact usage: the span takes the last one
            response = next((p for p in reversed(parts) if p.get("collector.correction")), parts[0])
            request_index = self._match_request(response, requests, used)
            request = requests[request_index] if request_index is not None else None
            if request_index is not None:
                used.add(request_index)
            self.spans.append(self._chat_span(key, request, response, parts))
        for index, request in enumerate(requests):
            if index not in used:
                self.spans.append(self._chat_span(str(request.get("event.id")), request, None, []))

    @staticmethod
    def _match_request(response: Entry, requests: Sequence[Entry], used: set[int]) -> int | None:
        request_id = response.get("gen_ai.request.id")
        for index, request in enumerate(requests):
            if index not in used and request_id and request.get("gen_ai.request.id") == request_id:
                return index
        for index, request in enumerate(requests):
            if (
                index not in used
                and not (request_id and request.get("gen_ai.request.id"))
                and _parent_call(request) == _parent_call(response)
                and _t(request) <= _t(response)
            ):
                return index
        return None

    def _chat_span(
        self, key: str, request: Entry | None, response: Entry | None, parts: list[Entry]
    ) -> SpanData:
        anchor = response or request
        assert anchor is not None
        attrs: dict[str, AttrValue] = {**self.common, "gen_ai.operation.name": "chat"}
        for source in (request, response):
            if source is None:
                continue
            for name in _CHAT_FIELDS:
                _put(attrs, name, source.get(name))
        if response is not None:
            for src, dst in TOKEN_ATTRIBUTES.items():
                _put(attrs, dst, response.get(src))
            _content(attrs, response, ("gen_ai.output.messages",))
        if request is not None:
            _content(attrs, request, ("gen_ai.input.messages",))
        end = max((_t(p) for p in parts), default=_t(anchor)) if response is not None else _t(anchor)
        if request is not None:
            start = _t(request)
        elif response is not None and isinstance(response.get("duration_ms"), int | float):
            start = _t(response) - int(float(response["duration_ms"]) * 1_000_000)
        else:
            start = end
        if response is None:
            attrs["agent_collector.incomplete"] = True
        model = attrs.get("gen_ai.request.model") or attrs.get("gen_ai.response.model")
        span = SpanData(
            name=f"chat {model}" if model else "chat",
            kind=CLIENT,
            trace_id=self.trace_id,
            span_id=chat_span_id(self.turn.agent, self.turn.session, key),
            parent_id=self._parent_for(anchor),
            start_ns=min(start, end),
            end_ns=end,
            attributes=attrs,
        )
        if "error.type" in attrs:
            span.status = "ERROR"
            span.status_message = str(attrs["error.type"])
        return span

    # tool spans ---------------------------------------------------------------------------------------
    def build_tools(self) -> None:
        calls: dict[str, Entry] = {}
        results: dict[str, Entry] = {}
        order: list[str] = []
        for entry in self.entries:
            name = _name(entry)
            if name not in ("tool.call", "tool.result"):
                continue
            key = str(entry.get("gen_ai.tool.call.id") or entry.get("event.id"))
            target = calls if name == "tool.call" else results
            target.setdefault(key, entry)
            if key not in order:
                order.append(key)
        for key in order:
            span = self._tool_span(key, calls.get(key), results.get(key))
            self.tool_spans[key] = span
            self.spans.append(span)

    def _tool_span(self, key: str, call: Entry | None, result: Entry | None) -> SpanData:
        anchor = call or result
        assert anchor is not None
        attrs: dict[str, AttrValue] = {**self.common, "gen_ai.operation.name": "execute_tool"}
        for source in (call, result):
            if source is not None:
                _put(attrs, "gen_ai.tool.name", source.get("gen_ai.tool.name"))
                _put(attrs, "gen_ai.tool.call.id", source.get("gen_ai.tool.call.id"))
        if call is not None:
            _content(attrs, call, ("gen_ai.tool.call.arguments",))
        status = "UNSET"
        message: str | None = None
        if result is not None:
            end = _t(result)
            if call is not None:
                start = _t(call)
            elif isinstance(result.get("duration_ms"), int | float):
                start = end - int(float(result["duration_ms"]) * 1_000_000)
            else:
                start = end
            _content(attrs, result, ("gen_ai.tool.call.result", "error.message"))
            outcome = result.get("tool.result.status")
            _put(attrs, "tool.result.status", outcome)
            if outcome in ("error", "cancelled"):
                status = "ERROR"
                attrs["error.type"] = str(result.get("error.type") or outcome)
                message = str(attrs["error.type"])
        else:
            start = end = _t(anchor)
            end = max(end, self.last_ns)
            attrs["agent_collector.incomplete"] = True
        tool = attrs.get("gen_ai.tool.name")
        return SpanData(
            name=f"execute_tool {tool}" if tool else "execute_tool",
            kind=INTERNAL,
            trace_id=self.trace_id,
            span_id=tool_span_id(self.turn.agent, self.turn.session, key),
            parent_id=self._parent_for(anchor),
            start_ns=min(start, end),
            end_ns=end,
            attributes=attrs,
            status=status,
            status_message=message,
        )

    # subagents, events, root ---------------------------------------------------------------------------
    def finish_subagents(self) -> None:
        for entry in self.entries:
            parent = _parent_call(entry)
            if parent is not None:
                self._subagent(parent, entry)
        for parent, span in self.subagents.items():
            children = [s for s in self.spans if s.parent_id == span.span_id]
            marks = [
                _t(e) for e in self.entries if _name(e).startswith("subagent.") and _parent_call(e) == parent
            ]
            starts = [s.start_ns for s in children] + marks
            ends = [s.end_ns for s in children] + marks
            span.start_ns = min(starts, default=span.start_ns)
            span.end_ns = max(ends, default=span.end_ns)
            self.spans.append(span)

    def attach_events(self, root: SpanData | None) -> None:
        by_id = {s.span_id: s for s in self.spans}
        if root is not None:
            by_id[root.span_id] = root
        for entry in self.entries:
            name = _name(entry)
            if name not in ("error", "compaction", "tool.approve", "session.status"):
                continue
            target_id = self._parent_for(entry)
            if name == "tool.approve" and entry.get("gen_ai.tool.call.id") in self.tool_spans:
                target_id = self.tool_spans[str(entry["gen_ai.tool.call.id"])].span_id
            target = by_id.get(target_id)
            if target is None:
                continue
            attrs: dict[str, AttrValue] = {}
            for key, value in entry.items():
                if key.startswith(("error.", "compaction.", "session.", "tool.", "gen_ai.tool.")):
                    _put(attrs, key, value)
            target.events.append(SpanEvent(name, _t(entry), attrs))
            if name == "error":
                target.status = "ERROR"
                target.attributes["error.type"] = str(entry.get("error.type") or "_OTHER")
                target.status_message = str(target.attributes["error.type"])

    def root(self) -> SpanData:
        turn = self.turn
        prompt = next((e for e in self.entries if _name(e) == "user.prompt"), None)
        llms = (e for e in self.entries if _name(e).startswith("llm.") and not _parent_call(e))
        first_llm = next(llms, None)
        attrs: dict[str, AttrValue] = {
            **self.common,
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": turn.agent,
        }
        if first_llm is not None:
            _put(attrs, "gen_ai.provider.name", first_llm.get("gen_ai.provider.name"))
            _put(attrs, "gen_ai.request.model", first_llm.get("gen_ai.request.model"))
        turn_id = next((e.get("gen_ai.turn.id") for e in self.entries if e.get("gen_ai.turn.id")), None)
        _put(attrs, "gen_ai.turn.id", turn_id)
        workspace = next((e.get("workspace.path") for e in self.entries if e.get("workspace.path")), None)
        _put(attrs, "workspace.path", workspace)
        if prompt is not None:
            _content(attrs, prompt, ("gen_ai.input.messages",))
        if not turn.complete:
            attrs["agent_collector.turn.incomplete"] = True
        starts = [_t(prompt)] if prompt is not None else []
        starts += [s.start_ns for s in self.spans] + [_t(e) for e in self.entries]
        ends = [s.end_ns for s in self.spans] + [_t(e) for e in self.entries]
        return SpanData(
            name=f"invoke_agent {turn.agent}",
            kind=INTERNAL,
            trace_id=self.trace_id,
            span_id=self.root_id,
            parent_id=self.upstream[1] if self.upstream else None,
            parent_remote=self.upstream is not None,
            start_ns=min(starts, default=0),
            end_ns=max(ends, default=0),
            attributes=attrs,
        )


def build_spans(turn: TurnInput) -> list[SpanData]:
    """All spans of ``turn``, the root first (unless ``include_root`` is off)."""
    builder = _Builder(turn)
    builder.build_chats()
    builder.build_tools()
    builder.finish_subagents()
    root = builder.root() if turn.include_root else None
    builder.attach_events(root)
    return ([root] if root is not None else []) + builder.spans

