"""The exporter interface, kept as small as the OpenTelemetry SDK's.

An exporter receives batches of finished entries (flat dicts, see schemas/activity-event.schema.json)
and either accepts the whole batch (returns) or raises :class:`ExportError`, saying whether the refusal
is permanent or worth another try later. It never sleeps or retries itself: the one retry loop is the
durable queue's (``collector.exporters.queue``); for a direct exporter (the JSONL file) the delivery
chain holds the batch uncommitted and offers it again (``collector.daemon.delivery``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

log = logging.getLogger(__name__)

Entry = dict[str, Any]
PoisonSink = Callable[[Entry, str], None]  # an entry an exporter cannot carry, and why (e.g. the quarantine)


def no_sink(entry: Entry, reason: str) -> None:
    """A poison sink that keeps nothing (the exporter counts it and logs it)."""


class ExportError(Exception):
    """The batch was not accepted. ``retryable``: the caller keeps it and offers it again later;
    otherwise it is refused for good (the caller counts and logs it). ``retry_after``: the least wait in
    seconds the backend asked for (HTTP 429/503 ``Retry-After``), if it did."""

    def __init__(self, message: str, retryable: bool = True, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


@runtime_checkable
class Exporter(Protocol):
    name: str

    def export(self, batch: Sequence[Entry]) -> None:
        """Accept every entry of ``batch`` durably, or raise ExportError."""

    def shutdown(self) -> None:
        """Flush and release resources. Called once."""

    def stats(self) -> dict[str, Any]:
        """Counters for ``status`` (queued, dropped, sent, errors...)."""


def shutdown_all(exporters: Sequence[Exporter], budget_s: float) -> list[str]:
    """Shut every exporter down at the same time (queues drain in parallel) and wait at most
    ``budget_s`` in total; return the names of those still busy (left to finish on daemon threads)."""
    threads = []
    for exporter in exporters:
        thread = threading.Thread(target=_shutdown_one, args=(exporter,), name=f"shutdown-{exporter.name}",
                                  daemon=True)
        thread.start()
        threads.append((exporter.name, thread))
    deadline = time.monotonic() + budget_s
    busy = []
    for name, thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            busy.append(name)
    if busy:
        log.warning("exporters still shutting down after %.1fs, not waiting: %s", budget_s, ", ".join(busy))
    return busy


def _shutdown_one(exporter: Exporter) -> None:
    try:
        exporter.shutdown()
    except Exception as exc:  # noqa: BLE001 - shutdown must reach every exporter
        log.warning("exporter %s did not shut down cleanly: %r", exporter.name, exc)
