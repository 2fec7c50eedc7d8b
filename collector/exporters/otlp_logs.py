"""Every entry as an OpenTelemetry LogRecord, encoded straight to OTLP protobuf and sent in one request.

The record's body and event name are ``event.name``, its times ``time_unix_nano`` and
``observed_time_unix_nano``, its attributes the entry's other fields (content fields only if the content
policy left them in the entry), its severity ERROR for ``error``, WARN for failed tools and model calls,
INFO otherwise. Records are grouped per resource (host.name + user.id) under the scope
``agent-collector``. The bytes equal those of the SDK's ``OTLPLogExporter`` for the same records
(``tests/test_otlp_wire.py``).

An entry that cannot be encoded is poison: it is left out and reported (quarantined) once the rest of
the batch was accepted; a failed send raises :class:`ExportError` and the durable queue retries.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import collector.exporters.otlp_wire as wire
import collector.exporters.semconv as semconv
from collector.exporters.base import Entry, ExportError
from collector.exporters.otlp_common import SCOPE, PoisonSink, ResourceCache, no_sink
from collector.exporters.otlp_send import Sender
from collector.exporters.semconv import DEFAULT, Semconv
from collector.exporters.trace_builder import AttrValue, attr_value

log = logging.getLogger(__name__)
_SKIP = frozenset({"time_unix_nano", "observed_time_unix_nano"})
_SEVERITY_NUMBER = {"ERROR": 17, "WARN": 13, "INFO": 9}  # SeverityNumber
_SEVERITY = {text: wire.tag(2, 0) + wire.varint(n) + wire.ld(3, text.encode()) for text, n in _SEVERITY_NUMBER.items()}


def severity_text(entry: Entry) -> str:
    name = entry.get("event.name")
    if name == "error":
        return "ERROR"
    if entry.get("tool.result.status") == "error" or (name == "llm.response" and entry.get("error.type")):
        return "WARN"
    return "INFO"


def log_attributes(entry: Entry) -> dict[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    for key, value in entry.items():
        if key in _SKIP:
            continue
        converted = attr_value(value)
        if converted is not None:
            out[key] = converted
    return out


def reason(exc: Exception) -> str:
    """Why an entry cannot be encoded, without its data (only our own messages are quoted)."""
    return str(exc) if isinstance(exc, wire.Unencodable) else type(exc).__name__


class LogEncoder:
    """Entries -> the body of an ``ExportLogsServiceRequest``, attributes memoised."""

    def __init__(self, resources: ResourceCache, names: Semconv = DEFAULT) -> None:
        self.resources = resources
        self.names = names  # which GenAI convention names (collector.exporters.semconv)
        self.attrs = wire.KeyValues(6, attr_value)

    def record(self, entry: Entry) -> bytes:
        """The body of one ``LogRecord`` (raises wire.Unencodable)."""
        time_ns = int(entry.get("time_unix_nano") or 0)
        observed = int(entry.get("observed_time_unix_nano") or time_ns)
        name = str(entry.get("event.name", ""))
        body = wire.ld(5, wire.any_value(name))
        attrs = self.attrs.fields(semconv.attributes(entry, self.names) if self.names.latest else entry, _SKIP)
        return b"".join((wire.fixed64(1, time_ns), _SEVERITY[severity_text(entry)], body, attrs,
                         wire.fixed64(11, observed), wire.string(12, name)))

    def request(self, batch: Sequence[Entry]) -> tuple[bytes, int, list[tuple[Entry, str]]]:
        """(request body, records in it, [(poison entry, reason)])."""
        groups: dict[tuple[str, str], list[bytes]] = {}
        poison: list[tuple[Entry, str]] = []
        for entry in batch:
            key = self.resources.key(entry)
            try:
                self.resources.encoded(key)
                encoded = self.record(entry)
            except (wire.Unencodable, TypeError, ValueError, OverflowError) as exc:
                poison.append((entry, f"OTLP logs: {reason(exc)}"))
                continue
            groups.setdefault(key, []).append(encoded)
        count = sum(len(v) for v in groups.values())
        body = wire.request((self.resources.encoded(k), SCOPE, v) for k, v in groups.items())
        return body, count, poison


class OtlpLogsExporter:
    def __init__(self, name: str, sender: Sender, resources: ResourceCache, poison: PoisonSink = no_sink,
                 names: Semconv = DEFAULT) -> None:
        self.name = name
        self.sender = sender
        self.encoder = LogEncoder(resources, names)
        self.on_poison = poison
        self.sent = 0
        self.batches = 0
        self.poison = 0  # entries the encoder refused: a permanent error, not "backend down"

    def export(self, batch: Sequence[Entry]) -> None:
        if not batch:
            return
        body, count, poison = self.encoder.request(batch)
        if count:
            self.sender.send(body, f"sending {count} log records")
        self.sent += count
        self.batches += 1
        for entry, reason in poison:
            self.poison += 1
            log.error("%s: entry %s cannot be encoded as an OTLP log record, quarantined: %s", self.name,
                      entry.get("event.id"), reason)
            self.on_poison(entry, reason)

    def shutdown(self) -> None:
        self.sender.close()

    def stats(self) -> dict[str, Any]:
        return {"signal": "logs", "endpoint": self.sender.endpoint, "sent": self.sent, "requests": self.batches,
                "unencodable": self.poison, "semconv": self.encoder.names.name}


__all__ = ["OtlpLogsExporter", "LogEncoder", "ExportError"]
