"""Wire the live view into the daemon: the session status tracker into the pipeline, the ingest server
into the event loop. ``attach(service)`` is called by ``agent-collector run`` before start-up."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from collector.ingest.envelope import to_envelope
from collector.ingest.server import DEFAULT_PORT, IngestConfig, IngestServer
from collector.pipeline.status import SessionStatusTracker
from collector.service import Service

log = logging.getLogger(__name__)


def attach(service: Service) -> None:
    tracker = SessionStatusTracker()
    service.components["status"] = tracker
    if service.config.get("ingest", {}).get("enabled", True):
        service.components.setdefault("starters", []).append(run_ingest)


def ingest_config(config: dict[str, Any]) -> IngestConfig:
    section = config.get("ingest", {})
    defaults = IngestConfig()
    return IngestConfig(
        host=str(section.get("host", defaults.host)),
        port=int(section.get("port", DEFAULT_PORT)),
        max_body_bytes=int(section.get("max_body_bytes", defaults.max_body_bytes)),
    )


def live_snapshot(service: Service) -> dict[str, Any]:
    tracker = service.components.get("status")
    snapshot = service.snapshot()
    if isinstance(tracker, SessionStatusTracker):
        snapshot["sessions"] = tracker.sessions()
        snapshot["session_status"] = tracker.summary()
    return snapshot


async def run_ingest(service: Service) -> None:
    """Serve until cancelled. A port already taken is logged, not fatal: command hooks still spool."""

    def submit(agent: str, body: bytes, received: float) -> None:
        envelope = to_envelope(agent, body, received)
        service.submit_hook(agent, envelope["event"] or "", envelope["payload"], received)

    config = ingest_config(service.config)
    server = IngestServer(submit, lambda: set(service.definitions), lambda: live_snapshot(service), config)
    try:
        await server.start()
    except OSError as exc:
        log.error("ingest server cannot listen on %s:%d (%s); http hooks will fail over to nothing, "
                  "command hooks keep spooling", config.host, config.port, exc.strerror or exc)
        return
    service.components["ingest"] = server
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()
