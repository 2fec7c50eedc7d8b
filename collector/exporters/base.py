"""The exporter interface, kept as small as the OpenTelemetry SDK's.

An exporter receives batches of finished entries (flat dicts, see schemas/activity-event.schema.json)
and either accepts the whole batch (returns) or raises :class:`ExportError`. Batching, retry and the
durable queue live once, in the shared wrappers (``collector.exporters.queue``), not in each exporter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

Entry = dict[str, Any]


class ExportError(Exception):
    """The batch was not accepted; the caller keeps it and tries again later."""

    def __init__(self, message: str, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


@runtime_checkable
class Exporter(Protocol):
    name: str

    def export(self, batch: Sequence[Entry]) -> None:
        """Accept every entry of ``batch`` durably, or raise ExportError."""

    def shutdown(self) -> None:
        """Flush and release resources. Called once."""

    def stats(self) -> dict[str, Any]:
        """Counters for ``status`` (queued, dropped, sent, errors...)."""
