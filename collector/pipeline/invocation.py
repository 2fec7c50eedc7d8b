"""Per-invocation context: what the program that started an agent put in the agent's environment, stamped
on every entry of that run (its session).

The hook script copies two variables of the agent's process into its spool line (the top of
``hooks/agent-collector-hook.sh``; ``collector.sources.spool_lines`` keeps them in the record's envelope):
``AGENT_COLLECTOR_ATTRIBUTES`` (``key=value,key=value``, the form of ``OTEL_RESOURCE_ATTRIBUTES``,
``collector.util.kv_pairs``: attributes of this run, such as a team or a ticket) and ``TRACEPARENT`` (the
W3C Trace Context of the caller's span, https://www.w3.org/TR/trace-context/#traceparent-header). The hook
writes ``false`` for a value it refused. Both are hostile: every hook record that names them is checked
here (the pairs by the rules of the global attributes, ``collector.pipeline.attributes.checked``; the
traceparent by :func:`parse_traceparent`), what passes is remembered for the sessions of the record's
entries from the time of the record on (a process that resumes a session can bring other values), and what
does not is left out and counted in ``problems`` (shown by ``status``).

Every entry of a remembered session, hook or transcript, then gets the attributes (fill-only: a field the
entry has is never replaced; the collector's own names are refused), and, when
``collector.upstream_trace_link`` is on, ``upstream.trace_id`` and ``upstream.parent_span_id``: the trace
exporter makes the session's turns children of that span (``collector.exporters.trace_builder``). The
state of a session is small (the hook caps the text at 1024 bytes, ``MAX_CHANGES`` contexts) and kept like
the correlator's
(:class:`~collector.pipeline.session_cache.SessionCache`): the most recent sessions in memory, the others in
the checkpoint store.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from collector.model import RawRecord
from collector.pipeline.attributes import checked, stamp
from collector.pipeline.session_cache import SessionCache
from collector.util.kv_pairs import parse_pairs

log = logging.getLogger(__name__)

ENV_ATTRIBUTES = "AGENT_COLLECTOR_ATTRIBUTES"
ENV_TRACEPARENT = "TRACEPARENT"
MAX_TEXT = 1024  # the hook refuses longer text already; a record written by another program may not
MAX_CHANGES = 16  # contexts kept per session (each process that resumed it can bring its own)
TRACE_ID = "upstream.trace_id"
PARENT_SPAN_ID = "upstream.parent_span_id"
_HEX = re.compile(r"[0-9a-f]+\Z")


@dataclass(frozen=True, slots=True)
class TraceParent:
    trace_id: str  # 32 lowercase hex digits, not all zero
    parent_id: str  # 16 lowercase hex digits, not all zero
    flags: str


def parse_traceparent(text: object) -> TraceParent | None:
    """W3C Trace Context ``traceparent`` (Level 1, section 3.2): ``version-trace_id-parent_id-flags`` in
    lowercase hex. Version ``ff`` is invalid; version ``00`` has exactly these four fields; a higher version
    may append fields after a dash and is read as version 00 (3.2.4). None: not a valid traceparent
    (an all-zero id included)."""
    if not isinstance(text, str) or len(text) < 55 or len(text) > 512:
        return None
    version = text[:2]
    if not _HEX.match(version) or version == "ff":
        return None
    if (version == "00" and len(text) != 55) or (len(text) > 55 and text[55] != "-"):
        return None
    parts = text[:55].split("-")
    if len(parts) != 4:
        return None
    _, trace_id, parent_id, flags = parts
    if (len(trace_id), len(parent_id), len(flags)) != (32, 16, 2):
        return None
    if not all(_HEX.match(p) for p in (trace_id, parent_id, flags)):
        return None
    if trace_id == "0" * 32 or parent_id == "0" * 16:
        return None
    return TraceParent(trace_id, parent_id, flags)


def parse_attributes(text: object, problems: dict[str, int]) -> dict[str, str]:
    """The usable pairs of an ``AGENT_COLLECTOR_ATTRIBUTES`` value; every refusal counted in ``problems``
    (a malformed value is discarded whole, as the OpenTelemetry SDK does with ``OTEL_RESOURCE_ATTRIBUTES``)."""
    if text is False:
        _count(problems, f"{ENV_ATTRIBUTES}: refused by the hook (over {MAX_TEXT} bytes, or a control "
                         "character, quote or backslash)")
        return {}
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        _count(problems, f"{ENV_ATTRIBUTES}: not a string of at most {MAX_TEXT} characters")
        return {}
    try:
        pairs = parse_pairs(text)
    except ValueError as exc:
        _count(problems, f"{ENV_ATTRIBUTES}: discarded, {exc}")
        return {}
    return checked(pairs, ENV_ATTRIBUTES, problems)


@dataclass(slots=True)
class Context:
    """One run's invocation context."""

    attributes: dict[str, str] = field(default_factory=dict)
    trace_id: str = ""
    parent_id: str = ""


Changes = list[tuple[int, Context]]  # (from this time on, the context), oldest first


class Invocations:
    """Remembers each session's invocation contexts (:meth:`observe`) and stamps them (:meth:`apply`).

    A session resumed by another process can have another context from then on: a session keeps each
    context with the time it began (the earliest entry of the record that named it), at most
    ``MAX_CHANGES``, and an entry gets the one of its own time (the first one if it is older), so the
    order in which sources are read does not matter. ``link_traces``: stamp the upstream span
    (``collector.upstream_trace_link``); ``load``: one saved session by key (agent id and session id joined by
    U+001F, in the checkpoint store), None when there is none; ``saved``: the store holds some (else
    nothing is looked up until a hook record names a context: most runs have none)."""

    def __init__(self, link_traces: bool = False, max_sessions: int = 2000,
                 load: Callable[[str], Any] | None = None, saved: bool = True) -> None:
        self.link_traces = link_traces
        self.problems: dict[str, int] = {}
        self._active = saved and load is not None
        self._sessions: SessionCache[Changes] = SessionCache(
            max_sessions, None if load is None else lambda key: decode(load(key)), keep_evicted=load is not None)

    def observe(self, record: RawRecord, entries: Iterable[dict[str, Any]]) -> None:
        """A hook record naming the agent's context: remembered for the sessions of its entries, from the
        time of its earliest entry on."""
        data = record.data
        if record.kind != "hook" or not isinstance(data, dict):
            return
        raw_attrs, raw_parent = data.get("attributes"), data.get("traceparent")
        if raw_attrs is None and raw_parent is None:
            return
        times: dict[str, int] = {}
        for entry in entries:
            if entry.get("gen_ai.session.id"):
                key, time_ns = _key(entry), int(entry.get("time_unix_nano") or 0)
                times[key] = min(times.get(key, time_ns), time_ns)
        if not times:
            return
        found = Context()
        if raw_attrs is not None:
            found.attributes = parse_attributes(raw_attrs, self.problems)
        if raw_parent is not None:
            parent = parse_traceparent(raw_parent)
            if parent is None:
                _count(self.problems, f"{ENV_TRACEPARENT}: not a W3C traceparent, ignored")
            else:
                found.trace_id, found.parent_id = parent.trace_id, parent.parent_id
        for key, time_ns in times.items():
            self._remember(key, time_ns, found)

    def _remember(self, key: str, time_ns: int, found: Context) -> None:
        self._active = True
        changes = self._sessions.get(key)
        if changes is None:
            self._sessions.put(key, [(time_ns, found)])
            return
        index = bisect.bisect_right([t for t, _ in changes], time_ns)
        if changes[max(index - 1, 0)][1] == found:
            if index == 0:  # the same context, seen earlier than known: it began then
                changes[0] = (time_ns, found)
            return
        changes.insert(index, (time_ns, found))
        if index < len(changes) - 1 and changes[index + 1][1] == found:
            del changes[index + 1]
        del changes[:-MAX_CHANGES]

    def apply(self, entry: dict[str, Any]) -> None:
        if not self._active or not entry.get("gen_ai.session.id"):
            return
        changes = self._sessions.get(_key(entry))
        if not changes:
            return
        index = bisect.bisect_right([t for t, _ in changes], int(entry.get("time_unix_nano") or 0))
        found = changes[max(index - 1, 0)][1]
        stamp(entry, found.attributes)
        if self.link_traces and found.trace_id and TRACE_ID not in entry:
            entry[TRACE_ID] = found.trace_id
            entry[PARENT_SPAN_ID] = found.parent_id

    def changes(self) -> list[tuple[str, list[Any]]]:
        """(key, state) of every session changed since the last call, to be saved."""
        return [(key, encode(s)) for key, s in self._sessions.drain()]


def _key(entry: dict[str, Any]) -> str:
    return f"{entry.get('gen_ai.agent.type') or ''}\x1f{entry['gen_ai.session.id']}"


def encode(changes: Changes) -> list[Any]:
    return [[t, {"attributes": c.attributes, "trace_id": c.trace_id, "parent_id": c.parent_id}] for t, c in changes]


def decode(raw: Any) -> Changes | None:
    """A saved session as :func:`encode` wrote it; anything else is no state."""
    if not isinstance(raw, list) or not raw:
        return None
    out: Changes = []
    for item in raw[-MAX_CHANGES:]:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], int) and isinstance(item[1], dict)):
            return None
        attrs, trace_id, parent_id = (item[1].get(k) for k in ("attributes", "trace_id", "parent_id"))
        if not isinstance(attrs, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in attrs.items()):
            return None
        if not isinstance(trace_id, str) or not isinstance(parent_id, str):
            return None
        out.append((item[0], Context(dict(attrs), trace_id, parent_id)))
    return out


def _count(problems: dict[str, int], reason: str) -> None:
    if reason not in problems:
        log.warning("per-invocation context: %s (left out, counted in status)", reason)
    problems[reason] = problems.get(reason, 0) + 1
