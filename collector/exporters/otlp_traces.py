"""Turns as traces: entries are grouped per user turn (``turns``), built into spans (``trace_builder``),
encoded straight to OTLP protobuf ``Span`` messages (the same bytes as the SDK's ``OTLPSpanExporter``,
``tests/test_otlp_wire.py``) and sent in one request.

Durability: the open turns and the spans built but not yet sent (the *outbox*) are saved in the checkpoint
store (``collector.state.checkpoints``, key ``exporter.<name>``) in :meth:`checkpoint`, which the durable
queue calls with its position just before it writes its ack file (after each delivered batch by default);
the position is saved in the same write, so a restart continues half-built traces from there and the
queue (``restored_position``) delivers again only what came after. ``export`` first retries the
outbox and raises :class:`ExportError` if that still fails, which makes the durable queue in front keep
the batch and back off; the outbox is therefore never bigger than what one batch and one tick produce.
Deterministic ids make any resend harmless.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import collector.exporters.otlp_wire as wire
import collector.exporters.semconv as semconv
from collector.exporters.base import Entry, ExportError
from collector.exporters.otlp_common import SCOPE, PoisonSink, ResourceCache, no_sink
from collector.exporters.otlp_logs import reason
from collector.exporters.otlp_send import Sender
from collector.exporters.semconv import DEFAULT, Semconv
from collector.exporters.trace_builder import SpanData, TurnInput, build_spans
from collector.exporters.turns import TurnAssembler
from collector.state.checkpoints import KeyState

log = logging.getLogger(__name__)
_KINDS = {"INTERNAL": 1, "CLIENT": 3}  # Span.SpanKind
_STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}  # Status.StatusCode
_FLAGS = wire.fixed32(16, 0x100)  # SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK: the parent is known to be local
_REMOTE = wire.fixed32(16, 0x300)  # ... and SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK: an upstream caller's span


def span_body(span: SpanData, attrs: wire.KeyValues, event_attrs: wire.KeyValues, names: Semconv = DEFAULT) -> bytes:
    """The body of one protobuf ``Span`` (raises wire.Unencodable), as the SDK's encoder writes it, its GenAI
    attributes under the convention ``names`` (``collector.exporters.semconv``)."""
    parts = [wire.ld(1, span.trace_id.to_bytes(16, "big")), wire.ld(2, span.span_id.to_bytes(8, "big"))]
    if span.parent_id is not None:
        parts.append(wire.ld(4, span.parent_id.to_bytes(8, "big")))
    parts.append(wire.string(5, span.name))
    parts.append(wire.tag(6, 0) + wire.varint(_KINDS.get(span.kind, 1)))
    parts.append(wire.fixed64(7, span.start_ns))
    parts.append(wire.fixed64(8, span.end_ns))
    parts.append(attrs.fields(_attributes(span, names)))
    for event in span.events:
        parts.append(wire.ld(11, wire.fixed64(1, event.time_ns) + wire.string(2, event.name)
                             + event_attrs.fields(event.attributes)))
    code = _STATUS[span.status]
    message = wire.string(2, span.status_message or "") if span.status == "ERROR" else b""
    parts.append(wire.ld(15, message + (wire.tag(3, 0) + wire.varint(code) if code else b"")))
    parts.append(_REMOTE if span.parent_remote else _FLAGS)
    return b"".join(parts)


def _attributes(span: SpanData, names: Semconv) -> dict[str, Any]:
    if not names.latest:
        return span.attributes
    if span.kind == "INTERNAL" and span.attributes.get("gen_ai.operation.name") == "invoke_agent":
        return semconv.agent_span_attributes(span.attributes, names)
    return semconv.attributes(span.attributes, names)


class OtlpTracesExporter:
    def __init__(
        self,
        name: str,
        sender: Sender,
        resources: ResourceCache,
        state: KeyState,
        idle_timeout_s: float = 300.0,
        grace_s: float = 3.0,
        poison: PoisonSink = no_sink,
        names: Semconv = DEFAULT,
    ) -> None:
        self.name = name
        self.names = names
        self.sender = sender
        self.resources = resources
        self.on_poison = poison
        self.attrs = wire.KeyValues(9)
        self.event_attrs = wire.KeyValues(3)
        self.state = state
        self.turns = TurnAssembler(idle_ns=int(idle_timeout_s * 1e9), grace_ns=int(grace_s * 1e9))
        self.outbox: list[tuple[tuple[str, str], list[SpanData]]] = []  # (resource key, spans) not yet sent
        self.position: dict[str, int] | None = None  # the queue position the saved state covers
        self.sent_spans = 0
        self.sent_traces = 0
        self.incomplete_traces = 0
        self.rejected_spans = 0
        self._lock = (
            threading.RLock()
        )  # the queue's thread exports and ticks; flush_all may come from another
        self._load()

    # -- state ------------------------------------------------------------------------------------------
    def _load(self) -> None:
        data = self.state.load()
        if not isinstance(data, dict):
            return
        position = data.get("position")
        self.position = position if isinstance(position, dict) else None
        try:
            self.turns.load_json(data.get("turns", {}))
            self.outbox = [((str(item["resource"][0]), str(item["resource"][1])),
                            [SpanData.from_json(span) for span in item["spans"]]) for item in data.get("outbox", [])]
        except (KeyError, TypeError, ValueError) as exc:
            log.error("%s: bad pending-turn state (%s); starting without it", self.name, exc)
        if self.turns.open_turns or self.outbox:
            log.info("%s: resuming %d open turns", self.name, self.turns.open_turns)

    def _save(self) -> None:
        outbox = [{"resource": list(key), "spans": [s.to_json() for s in spans]} for key, spans in self.outbox]
        self.state.save({"turns": self.turns.to_json(), "outbox": outbox, "position": self.position})

    # -- the Exporter interface ---------------------------------------------------------------------------
    def export(self, batch: Sequence[Entry]) -> None:
        with self._lock:
            self._export(batch)

    def _export(self, batch: Sequence[Entry]) -> None:
        self._send_outbox()  # raises while the backend is down: the queue keeps the batch
        now = time.time_ns()
        for entry in batch:
            self.turns.add(dict(entry), now)
        self._release(now)
        try:
            self._send_outbox()
        except Exception as exc:  # noqa: BLE001 - kept in the outbox; the next call retries
            log.debug("%s: send deferred: %s", self.name, exc)
        # not saved here: the queue calls checkpoint(position) before it writes its position

    def checkpoint(self, position: dict[str, int] | None = None) -> None:
        """Save the open turns and the outbox with the queue ``position`` they cover (the queue calls this
        just before it writes its ack file: what comes after is delivered again after a crash)."""
        with self._lock:
            if position is not None:
                self.position = dict(position)
            self._save()

    def restored_position(self) -> dict[str, int] | None:
        """The queue position the state loaded at start covers (the queue resumes there if it is ahead)."""
        return self.position

    def tick(self, now_ns: int) -> None:
        """Release idle or ended turns; retry the outbox (raises ExportError when the backend is down).

        Saved after the send: a crash before the save leaves the turns open in the saved state, so they
        are built and sent again (the same ids) after a restart."""
        with self._lock:
            released = self._release(now_ns)
            had_outbox = bool(self.outbox)
            try:
                self._send_outbox()
            finally:
                if released or had_outbox:
                    self._save()

    def end_of_input(self, now_ns: int) -> None:
        """``collect --once`` read everything: send every turn its input shows finished, judged by the
        entries' own times (``TurnAssembler.end_of_input``); raises ExportError when the backend is down
        (the spans stay in the outbox, saved, for the next tick or run)."""
        with self._lock:
            for unit in self.turns.end_of_input(now_ns):
                self._build(unit)
            try:
                self._send_outbox()
            finally:
                self._save()

    def backlog(self) -> int:
        """Spans built and not sent yet. Without the lock (a send may hold it for its whole timeout):
        ``outbox`` is only ever extended or replaced, so this reads one consistent list."""
        outbox = self.outbox
        return sum(len(spans) for _, spans in list(outbox))

    def flush_all(self) -> None:
        """Send every open turn now, marked incomplete (used by replays and tests)."""
        with self._lock:
            self.turns.idle_ns = 0
            self.turns.grace_ns = 0
            self.tick(time.time_ns())

    def shutdown(self) -> None:
        self.sender.close()
        with self._lock:
            self._save()

    def stats(self) -> dict[str, Any]:
        return {
            "signal": "traces",
            "endpoint": self.sender.endpoint,
            "open_turns": self.turns.open_turns,
            "outbox_spans": sum(len(spans) for _, spans in self.outbox),
            "sent_spans": self.sent_spans,
            "sent_traces": self.sent_traces,
            "incomplete_traces": self.incomplete_traces,
            "late_entries": self.turns.late_entries,
            "duplicate_entries": self.turns.duplicates,
            "rejected_spans": self.rejected_spans,
            "semconv": self.names.name,
        }

    # -- internals -----------------------------------------------------------------------------------------
    def _release(self, now_ns: int) -> bool:
        units = self.turns.due(now_ns)
        for unit in units:
            self._build(unit)
        return bool(units)

    def _build(self, unit: TurnInput) -> None:
        spans = build_spans(unit)
        fresh = set(self.turns.record_sent(unit, [f"{s.span_id:016x}" for s in spans]))
        spans = [s for s in spans if f"{s.span_id:016x}" in fresh]
        if not spans:
            return
        first = unit.entries[0] if unit.entries else {}
        self.outbox.append((self.resources.key(first), spans))
        if unit.include_root:
            self.sent_traces += 1
            if not unit.complete:
                self.incomplete_traces += 1

    def _send_outbox(self) -> None:
        if not self.outbox:
            return
        groups: dict[tuple[str, str], list[bytes]] = {}
        poison: list[tuple[Entry, str]] = []
        for key, spans in self.outbox:
            for span in spans:
                try:
                    self.resources.encoded(key)
                    encoded = span_body(span, self.attrs, self.event_attrs, self.names)
                except (wire.Unencodable, TypeError, ValueError, OverflowError) as exc:
                    poison.append(({"otlp.span.id": f"{span.span_id:016x}", "otlp.span.name": span.name},
                                   f"OTLP traces: {reason(exc)}"))
                    continue
                groups.setdefault(key, []).append(encoded)
        count = sum(len(v) for v in groups.values())
        try:
            if count:
                body = wire.request((self.resources.encoded(k), SCOPE, v) for k, v in groups.items())
                self.sender.send(body, f"sending {count} spans")
            self.sent_spans += count
        except ExportError as error:
            if error.retryable:
                raise
            log.error("%s: backend refused %d spans for good, dropping them: %s", self.name, count, error)
            self.rejected_spans += count
        for what, why in poison:  # a span protobuf cannot carry: a permanent error, the rest went on
            self.rejected_spans += 1
            log.error("%s: span %s cannot be encoded as OTLP, dropped for good: %s", self.name,
                      what["otlp.span.id"], why)
            self.on_poison(what, why)
        self.outbox = []
