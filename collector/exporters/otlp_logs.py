"""Every entry as an OpenTelemetry LogRecord, sent with the SDK's OTLP log exporter.

Records are made by an SDK ``LoggerProvider`` (one per resource: host.name + user.id) whose processor
only collects them; the batch is then handed to ``OTLPLogExporter.export`` directly so that a failure
reaches the durable queue as :class:`ExportError` instead of being swallowed by a background processor.
The record's event name is ``event.name``, its time ``time_unix_nano``, its attributes the entry's fields
(content fields only if the content policy left them in the entry).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor, ReadWriteLogRecord
from opentelemetry.sdk._logs.export import LogRecordExportResult

from collector import __version__
from collector.exporters.base import Entry, ExportError
from collector.exporters.otlp_common import ResourceCache, SdkExporter, drop_unencodable
from collector.exporters.trace_builder import AttrValue, attr_value

log = logging.getLogger(__name__)
_SKIP = frozenset({"time_unix_nano", "observed_time_unix_nano"})


class _Collect(LogRecordProcessor):
    """A processor that keeps what is emitted until the exporter takes it."""

    def __init__(self) -> None:
        self.records: list[ReadWriteLogRecord] = []

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        self.records.append(log_record)

    def shutdown(self) -> None:
        self.records.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def severity(entry: Entry) -> tuple[SeverityNumber, str]:
    name = entry.get("event.name")
    if name == "error":
        return SeverityNumber.ERROR, "ERROR"
    if entry.get("tool.result.status") == "error" or (name == "llm.response" and entry.get("error.type")):
        return SeverityNumber.WARN, "WARN"
    return SeverityNumber.INFO, "INFO"


def log_attributes(entry: Entry) -> dict[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    for key, value in entry.items():
        if key in _SKIP:
            continue
        converted = attr_value(value)
        if converted is not None:
            out[key] = converted
    return out


class OtlpLogsExporter:
    def __init__(self, name: str, sdk: SdkExporter, resources: ResourceCache) -> None:
        self.name = name
        self.sdk = sdk
        self.resources = resources
        self._providers: dict[tuple[str, str], tuple[LoggerProvider, _Collect, Any]] = {}
        self.sent = 0
        self.batches = 0
        self.poison = 0  # entries the encoder refused: a permanent error, not "backend down"

    def _logger(self, key: tuple[str, str]) -> tuple[_Collect, Any]:
        found = self._providers.get(key)
        if found is None:
            collect = _Collect()
            provider = LoggerProvider(resource=self.resources.get(key), shutdown_on_exit=False)
            provider.add_log_record_processor(collect)
            logger = provider.get_logger("agent-collector", __version__)
            found = self._providers[key] = (provider, collect, logger)
        return found[1], found[2]

    def records(self, batch: Sequence[Entry]) -> list[ReadWriteLogRecord]:
        out: list[ReadWriteLogRecord] = []
        for entry in batch:
            collect, logger = self._logger(self.resources.key(entry))
            number, text = severity(entry)
            time_ns = int(entry.get("time_unix_nano") or 0)
            logger.emit(
                LogRecord(
                    timestamp=time_ns,
                    observed_timestamp=int(entry.get("observed_time_unix_nano") or time_ns),
                    severity_number=number,
                    severity_text=text,
                    body=str(entry.get("event.name", "")),
                    attributes=log_attributes(entry),
                    event_name=str(entry.get("event.name", "")) or None,
                )
            )
            out.extend(collect.records)
            collect.records.clear()
        return out

    def export(self, batch: Sequence[Entry]) -> None:
        if not batch:
            return
        records = self.records(batch)
        self.sdk.reset()
        ok = self.sdk.exporter.export(records) == LogRecordExportResult.SUCCESS
        if not ok and not self.sdk.answered():
            records, poison = drop_unencodable(records, encode_logs)
            if poison:
                self.poison += poison
                log.error("%s: %d entries cannot be encoded as OTLP logs, dropped for good", self.name, poison)
                self.sdk.reset()
                ok = not records or self.sdk.exporter.export(records) == LogRecordExportResult.SUCCESS
        if not ok:
            raise self.sdk.failure(f"sending {len(records)} log records")
        self.sent += len(records)
        self.batches += 1

    def shutdown(self) -> None:
        self.sdk.exporter.shutdown()
        for provider, _, _ in self._providers.values():
            provider.shutdown()

    def stats(self) -> dict[str, Any]:
        return {"signal": "logs", "endpoint": self.sdk.endpoint, "sent": self.sent, "requests": self.batches,
                "unencodable": self.poison}


__all__ = ["OtlpLogsExporter", "ExportError"]
