"""The OTLP/HTTP receiver on the ingest listener: ``POST /v1/logs``, ``/v1/metrics``, ``/v1/traces``.

An agent's own OpenTelemetry exporter posts here (the token in ``X-Agent-Collector-Token``, e.g. through
``OTEL_EXPORTER_OTLP_HEADERS``; no browser, like every ingest route). The body is decoded
(``collector.ingest.otlp_decode``: protobuf or JSON, gzip, the cap after decompression) and each resource
goes to the agent whose ``otlp`` source lists its ``service.name`` (``service_names``); the resources of
one agent are appended as ONE spool line, ``{"ts", "agent", "event": <signal>, "payload": {"digest",
"export"}}``, to ``<spool>/otlp/<agent>/`` through the spool relay, and the answer (200, an
Export<Signal>ServiceResponse) goes out only once that line is on disk. A resource whose service is not
mapped is counted (``unknown_services``) and named in the answer's ``partial_success``, not stored.
``digest`` (the SHA-256 of the body as it came, 32 hex digits) lets the readers give a retried request the
same record ids. docs/otlp-receiver.md has the whole contract.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from collector.ingest.otlp_decode import (
    RESOURCES,
    SIGNALS,
    Encoding,
    OtlpRefused,
    count_records,
    decode_request,
    service_name,
    status_body,
    success,
)
from collector.ingest.relay import RelayFull, SpoolRelay, SpoolWriteFailed
from collector.ingest.wire import Request, Response
from collector.sources.otlp_files import SPOOL_FOLDER
from collector.sources.spool_writer import SpoolWriter

log = logging.getLogger(__name__)

UNKNOWN_REMEMBERED = 64  # distinct unknown service names counted by name; the rest under "(other)"


def spool_folder(agent: str) -> str:
    return f"{SPOOL_FOLDER}/{agent}"


@dataclass(slots=True)
class OtlpRoute:
    """``service_agents()``: service.name -> agent id, read for every request (definitions change)."""

    relay: SpoolRelay
    service_agents: Callable[[], Mapping[str, str]]
    max_body_bytes: int
    max_line: int  # the spool source's line cap (collector.max_line_bytes): a longer line would be skipped
    forward: Callable[[str, str, str, dict[str, Any]], None] | None = None  # the pass-through, once durable
    requests: Counter[str] = field(default_factory=Counter)  # "<signal>_<status>"
    records: Counter[str] = field(default_factory=Counter)  # agent -> records spooled
    unknown_services: Counter[str] = field(default_factory=Counter)  # service.name -> records skipped

    def owns(self, path: str) -> bool:
        return path in SIGNALS

    def stats(self) -> dict[str, Any]:
        return {"requests": dict(self.requests), "records": dict(self.records),
                "unknown_services": dict(self.unknown_services)}

    async def post(self, request: Request, body: bytes, received: float) -> Response:
        signal = SIGNALS[request.path]
        encoding: Encoding | None = None
        try:
            encoding = Encoding.of(request.headers.get("content-type"))
            # a worker thread: about 30 us a record, so a request at the cap would hold the loop (and the
            # hooks posted meanwhile) for seconds
            export = await asyncio.to_thread(decode_request, signal, encoding,
                                             request.headers.get("content-encoding"), body, self.max_body_bytes)
            by_agent, skipped, unknown = self._route(signal, export)
            await self._spool(signal, hashlib.sha256(body).hexdigest()[:32], by_agent, received)
        except OtlpRefused as refused:
            self.requests[f"{signal}_{refused.status}"] += 1
            payload, media = status_body(encoding, refused.status, str(refused))
            return Response(refused.status, payload, media)
        self.requests[f"{signal}_200"] += 1
        message = f"service.name not mapped to an agent: {', '.join(sorted(unknown))}" if skipped else ""
        assert encoding is not None
        return Response(200, success(signal, encoding, skipped, message), encoding.media)

    def _route(self, signal: str, export: dict[str, Any]) -> tuple[dict[str, list[Any]], int, set[str]]:
        """The resources of each agent, and the records (and names) of the services no agent claims."""
        agents = self.service_agents()
        by_agent: dict[str, list[Any]] = {}
        skipped = 0
        unknown: set[str] = set()
        for resource in export.get(RESOURCES[signal], ()):
            name = service_name(resource)
            agent = agents.get(name) if name is not None else None
            if agent is not None:
                by_agent.setdefault(agent, []).append(resource)
                continue
            count = count_records(signal, resource)
            label = name if name is not None else "(none)"
            if label not in self.unknown_services and len(self.unknown_services) >= UNKNOWN_REMEMBERED:
                label = "(other)"
            self.unknown_services[label] += count
            skipped += count
            unknown.add(label)
        return by_agent, skipped, unknown

    async def _spool(self, signal: str, digest: str, by_agent: dict[str, list[Any]], received: float) -> None:
        """Every agent's line durable before the answer (a failure answers 503, and the client retries)."""
        if not by_agent:
            return
        try:
            lines = {agent: SpoolWriter.line(agent, signal, {"digest": digest, "export": {RESOURCES[signal]: part}},
                                             received) for agent, part in by_agent.items()}
        except orjson.JSONEncodeError as exc:
            raise OtlpRefused(400, f"the request cannot be stored ({exc})") from None
        longest = max(len(line) for line in lines.values())
        if longest > self.max_line:
            raise OtlpRefused(413, f"the request is {longest} bytes as OTLP/JSON, over the spool's line cap of "
                                   f"{self.max_line} (collector.max_line_bytes): send smaller batches")
        try:
            durable = [self.relay.submit_line(spool_folder(agent), line) for agent, line in lines.items()]
        except RelayFull:
            raise OtlpRefused(503, "the spool writer is behind; retry later") from None
        try:
            await asyncio.gather(*durable)
        except SpoolWriteFailed as exc:
            raise OtlpRefused(503, str(exc)) from None
        for agent, resources in by_agent.items():
            self.records[agent] += sum(count_records(signal, r) for r in resources)
            if self.forward is not None:  # to the user's own backend (collector.exporters.passthrough)
                self.forward(agent, signal, digest, {RESOURCES[signal]: resources})
