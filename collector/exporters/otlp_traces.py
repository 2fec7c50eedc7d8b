"""Turns as traces: entries are grouped per user turn (``turns``), built into spans (``trace_builder``),
made into SDK ``ReadableSpan`` objects with their own ids and times, and sent with ``OTLPSpanExporter``.

Durability: the open turns and the spans built but not yet sent (the *outbox*) are saved in the checkpoint
store (``collector.state.checkpoints``, key ``exporter.<name>``) before ``export`` returns, so a restart continues
half-built traces. ``export`` first retries the outbox and raises :class:`ExportError` if that still
fails, which makes the durable queue in front keep the batch and back off; the outbox is therefore never
bigger than what one batch and one tick produce. Deterministic ids make any resend harmless.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from collector.exporters.base import Entry
from collector.exporters.otlp_common import SCOPE, ResourceCache, SdkExporter, drop_unencodable
from collector.exporters.trace_builder import SpanData, TurnInput, build_spans
from collector.exporters.turns import TurnAssembler
from collector.state.checkpoints import KeyState

log = logging.getLogger(__name__)
_KINDS = {"INTERNAL": SpanKind.INTERNAL, "CLIENT": SpanKind.CLIENT}
_STATUS = {"UNSET": StatusCode.UNSET, "OK": StatusCode.OK, "ERROR": StatusCode.ERROR}


def to_readable(span: SpanData, resources: ResourceCache, resource_key: tuple[str, str]) -> ReadableSpan:
    flags = TraceFlags(TraceFlags.SAMPLED)
    context = SpanContext(span.trace_id, span.span_id, is_remote=False, trace_flags=flags)
    parent = (
        None
        if span.parent_id is None
        else SpanContext(span.trace_id, span.parent_id, is_remote=False, trace_flags=flags)
    )
    status = Status(_STATUS[span.status], span.status_message if span.status == "ERROR" else None)
    return ReadableSpan(
        name=span.name,
        context=context,
        parent=parent,
        resource=resources.get(resource_key),
        attributes=dict(span.attributes),
        events=[Event(e.name, dict(e.attributes), e.time_ns) for e in span.events],
        kind=_KINDS.get(span.kind, trace_api.SpanKind.INTERNAL),
        status=status,
        start_time=span.start_ns,
        end_time=span.end_ns,
        instrumentation_scope=SCOPE,
    )


class OtlpTracesExporter:
    def __init__(
        self,
        name: str,
        sdk: SdkExporter,
        resources: ResourceCache,
        state: KeyState,
        idle_timeout_s: float = 300.0,
        grace_s: float = 3.0,
    ) -> None:
        self.name = name
        self.sdk = sdk
        self.resources = resources
        self.state = state
        self.turns = TurnAssembler(idle_ns=int(idle_timeout_s * 1e9), grace_ns=int(grace_s * 1e9))
        self.outbox: list[dict[str, Any]] = []  # {"resource": [host, user], "spans": [SpanData json]}
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
        try:
            self.turns.load_json(data.get("turns", {}))
            self.outbox = list(data.get("outbox", []))
        except (KeyError, TypeError, ValueError) as exc:
            log.error("%s: bad pending-turn state (%s); starting without it", self.name, exc)
        if self.turns.open_turns or self.outbox:
            log.info("%s: resuming %d open turns", self.name, self.turns.open_turns)

    def _save(self) -> None:
        self.state.save({"turns": self.turns.to_json(), "outbox": self.outbox})

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
        self._save()
        try:
            self._send_outbox()
        except Exception as exc:  # noqa: BLE001 - kept in the outbox; the next call retries
            log.debug("%s: send deferred: %s", self.name, exc)

    def tick(self, now_ns: int) -> None:
        """Release idle or ended turns; retry the outbox (raises ExportError when the backend is down)."""
        with self._lock:
            if self._release(now_ns):
                self._save()
            self._send_outbox()

    def end_of_input(self, now_ns: int) -> None:
        """``collect --once`` read everything: send every turn its input shows finished, judged by the
        entries' own times (``TurnAssembler.end_of_input``); raises ExportError when the backend is down
        (the spans stay in the outbox, saved, for the next tick or run)."""
        with self._lock:
            for unit in self.turns.end_of_input(now_ns):
                self._build(unit)
            self._save()
            self._send_outbox()

    def backlog(self) -> int:
        """Spans built and not sent yet. Without the lock (a send may hold it for its whole timeout):
        ``outbox`` is only ever extended or replaced, so this reads one consistent list."""
        outbox = self.outbox
        return sum(len(item["spans"]) for item in list(outbox))

    def flush_all(self) -> None:
        """Send every open turn now, marked incomplete (used by replays and tests)."""
        with self._lock:
            self.turns.idle_ns = 0
            self.turns.grace_ns = 0
            self.tick(time.time_ns())

    def shutdown(self) -> None:
        self.sdk.exporter.shutdown()  # first: aborts a send blocked in the SDK's retries
        with self._lock:
            self._save()

    def stats(self) -> dict[str, Any]:
        return {
            "signal": "traces",
            "endpoint": self.sdk.endpoint,
            "open_turns": self.turns.open_turns,
            "outbox_spans": sum(len(item["spans"]) for item in self.outbox),
            "sent_spans": self.sent_spans,
            "sent_traces": self.sent_traces,
            "incomplete_traces": self.incomplete_traces,
            "late_entries": self.turns.late_entries,
            "duplicate_entries": self.turns.duplicates,
            "rejected_spans": self.rejected_spans,
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
        self.outbox.append(
            {"resource": list(self.resources.key(first)), "spans": [s.to_json() for s in spans]}
        )
        if unit.include_root:
            self.sent_traces += 1
            if not unit.complete:
                self.incomplete_traces += 1

    def _send_outbox(self) -> None:
        if not self.outbox:
            return
        readable = [
            to_readable(SpanData.from_json(span), self.resources, (item["resource"][0], item["resource"][1]))
            for item in self.outbox
            for span in item["spans"]
        ]
        self.sdk.reset()
        ok = self.sdk.exporter.export(readable) == SpanExportResult.SUCCESS
        if not ok and not self.sdk.answered():
            readable, poison = drop_unencodable(readable, encode_spans)
            if poison:  # an entry protobuf cannot carry: a permanent error, the rest goes on
                self.rejected_spans += poison
                log.error("%s: %d spans cannot be encoded as OTLP, dropped for good", self.name, poison)
                self.sdk.reset()
                ok = not readable or self.sdk.exporter.export(readable) == SpanExportResult.SUCCESS
        if not ok:
            error = self.sdk.failure(f"sending {len(readable)} spans")
            if error.retryable:
                raise error
            log.error(
                "%s: backend refused %d spans for good, dropping them: %s", self.name, len(readable), error
            )
            self.rejected_spans += len(readable)
        else:
            self.sent_spans += len(readable)
        self.outbox = []
        self._save()
