"""The pass-through exporter: an agent's own telemetry, as our OTLP receiver took it, forwarded unchanged
to the backend the user had configured for that agent before ``install --telemetry`` pointed it at us
(docs/otlp-receiver.md, "Forwarding").

The receiver offers each agent's part of a request once it is durable in the spool
(:meth:`Forwarder.offer`): the part's ``export`` (OTLP/JSON, the resources of that agent exactly as the
agent sent them, ids hex) goes into a durable queue (:class:`collector.exporters.queue.QueuedExporter`,
``<data dir>/queue/passthrough/<agent>/``), whose delivery thread posts it to ``<endpoint>/v1/<signal>``
as ``application/json`` with the user's headers (:class:`collector.exporters.otlp_send.HttpSender`: one
attempt per try, the queue retrying with backoff). A backend that is down loses nothing until the queue's
cap; a ``kill -9`` resends at most the last batch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from collector.exporters.base import Entry, ExportError
from collector.exporters.otlp_send import HttpSender
from collector.exporters.queue import QueuedExporter

log = logging.getLogger(__name__)

SIGNALS = ("logs", "metrics", "traces")
QUEUE_CAP_BYTES = 256 * 1024 * 1024
TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Target:
    endpoint: str  # the user's base URL (the SDK's OTEL_EXPORTER_OTLP_ENDPOINT form)
    headers: dict[str, str]


class PassThroughExporter:
    """Posts each queued request (an entry ``{"event.id", "signal", "export"}``) to the target."""

    def __init__(self, agent: str, target: Target) -> None:
        self.name = f"passthrough-{agent}"
        self._senders = {s: HttpSender(f"{target.endpoint}/v1/{s}",
                                       {"Content-Type": "application/json", **target.headers}, TIMEOUT_S)
                         for s in SIGNALS}
        self.sent = 0

    def export(self, batch: Sequence[Entry]) -> None:
        for entry in batch:
            signal = entry.get("signal")
            sender = self._senders.get(signal) if isinstance(signal, str) else None
            if sender is None:
                continue  # not ours to send (cannot happen from the receiver)
            sender.send(orjson.dumps(entry.get("export")), f"{self.name} {signal}")
            self.sent += 1

    def shutdown(self) -> None:
        for sender in self._senders.values():
            sender.close()

    def stats(self) -> dict[str, Any]:
        return {"sent": self.sent}


def targets_from(raw: Mapping[str, Any]) -> dict[str, Target]:
    """Per agent, a valid target from the saved choices (``{agent: {endpoint, headers}}``)."""
    out: dict[str, Target] = {}
    for agent, value in raw.items():
        endpoint = value.get("endpoint") if isinstance(value, dict) else None
        headers = value.get("headers") if isinstance(value, dict) else None
        if isinstance(endpoint, str) and endpoint.startswith(("http://", "https://")):
            clean = {str(k): str(v) for k, v in headers.items()} if isinstance(headers, dict) else {}
            out[agent] = Target(endpoint.rstrip("/"), clean)
    return out


class Forwarder:
    """One durable queue per agent that has a target; ``offer`` is called from the receiver."""

    def __init__(self, targets: Mapping[str, Target], queue_dir: Path) -> None:
        self._queues = {agent: QueuedExporter(PassThroughExporter(agent, target), queue_dir / agent,
                                              QUEUE_CAP_BYTES)
                        for agent, target in targets.items()}
        self.refused = 0

    @property
    def agents(self) -> set[str]:
        return set(self._queues)

    def offer(self, agent: str, signal: str, digest: str, export: dict[str, Any]) -> None:
        queue = self._queues.get(agent)
        if queue is None:
            return
        try:
            queue.export([{"event.id": f"{digest}:{agent}:{signal}", "signal": signal, "export": export}])
        except ExportError as exc:  # the queue's disk: counted and logged, the receiver's answer stands
            self.refused += 1
            log.error("telemetry of %s not queued for forwarding: %s", agent, exc)

    def flush(self, timeout: float) -> bool:
        return all(queue.flush(timeout) for queue in self._queues.values())

    def close(self) -> None:
        for queue in self._queues.values():
            queue.shutdown()

    def stats(self) -> dict[str, Any]:
        return {"refused": self.refused, **{agent: q.stats() for agent, q in self._queues.items()}}
