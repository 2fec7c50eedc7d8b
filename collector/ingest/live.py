"""The live view as a daemon part (:class:`collector.daemon.parts.DaemonPart`): the loopback ingest server,
whose posted hooks go to the spool through one writer thread, and which serves the live snapshot (the
Service's status plus the session status tracker's sessions). ``agent-collector run`` builds it."""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

import collector.ingest.port_moves as port_moves
from collector.config import Config
from collector.exporters.passthrough import Forwarder
from collector.ingest.envelope import to_envelope
from collector.ingest.otlp_route import OtlpRoute
from collector.ingest.owner import listener_uid
from collector.ingest.relay import SpoolRelay, SpoolWriteFailed
from collector.ingest.secret import choose_port, ensure_token, ingest_port, port_is_free, record_port
from collector.ingest.server import BodyRoute, HttpError, IngestConfig, IngestServer, Route
from collector.paths import Paths
from collector.pipeline.status import SessionStatusTracker
from collector.sources.spool_writer import SpoolWriter

log = logging.getLogger(__name__)


def ingest_config(config: Config, paths: Paths) -> IngestConfig:
    """The user's secret (made now if missing) and port (configured, or chosen per user and kept)."""
    return IngestConfig(token=ensure_token(paths), port=ingest_port(paths, config.ingest.port),
                        max_body_bytes=config.ingest.max_body_bytes, otlp_max_bytes=config.ingest.otlp_max_bytes,
                        spool_max_line=config.collector.max_line_bytes)


def live_snapshot(snapshot: dict[str, Any], tracker: SessionStatusTracker | None) -> dict[str, Any]:
    """The Service's status snapshot with the live sessions added."""
    if tracker is not None:
        snapshot["sessions"] = tracker.sessions()
        snapshot["session_status"] = tracker.summary()
    return snapshot


class IngestPart:
    """The ingest server and its spool relay. A port already taken is logged, not fatal: command hooks
    still spool. Posted hooks go to the spool (durable, read by the same spool source as the hook
    script's lines); the spool directory's file events wake the collection loop. With ``service_agents``
    (service.name -> agent id), the OTLP receiver (``collector.ingest.otlp_route``) shares the relay."""

    name = "ingest"

    def __init__(self, config: IngestConfig, spool_writer: SpoolWriter, known_agents: Callable[[], set[str]],
                 snapshot: Callable[[], dict[str, Any]], routes: Sequence[Route] = (),
                 paths: Paths | None = None, service_agents: Callable[[], Mapping[str, str]] | None = None,
                 forwarder: Forwarder | None = None) -> None:
        self.config = config
        self._forwarder = forwarder  # the agents' telemetry to the user's own backend (install --telemetry)
        self._service_agents = service_agents
        self._routes = list(routes)  # extra routes: the dashboard
        self._paths = paths  # where the port in effect is recorded (<state dir>/ingest.port)
        self._writer = spool_writer
        self._known_agents = known_agents
        self._snapshot = snapshot
        self.server: IngestServer | None = None
        self.relay: SpoolRelay | None = None
        self.otlp: OtlpRoute | None = None
        self._body_routes: list[BodyRoute] = []

    async def start(self) -> None:
        relay = SpoolRelay(self._writer)
        otlp = None if self._service_agents is None else OtlpRoute(
            relay, self._service_agents, self.config.otlp_max_bytes, self.config.spool_max_line,
            None if self._forwarder is None else self._forwarder.offer)
        self._body_routes = [] if otlp is None else [otlp]

        async def submit(agent: str, body: bytes, received: float) -> None:
            """Answered when the line is durable: 400 if it cannot be stored, 500 if the write failed."""
            envelope = to_envelope(agent, body, received)
            try:
                durable = relay.submit(agent, envelope["event"] or "", envelope["payload"], received)
            except orjson.JSONEncodeError as exc:
                raise HttpError(400, f"the payload cannot be stored ({exc})") from None
            try:
                await durable
            except SpoolWriteFailed as exc:
                raise HttpError(500, str(exc)) from None

        def snapshot() -> dict[str, Any]:
            extra = {} if otlp is None else {"otlp": otlp.stats()}
            if self._forwarder is not None:
                extra["otlp_forward"] = self._forwarder.stats()
            return {**self._snapshot(), "spool_relay": relay.stats(), **extra}

        server = IngestServer(submit, self._known_agents, snapshot, self.config, routes=self._routes,
                              body_routes=self._body_routes)
        try:
            await server.start()
        except OSError as exc:
            moved = await self._elsewhere(exc, submit, snapshot)
            if moved is None:
                relay.close()
                log.error("ingest server cannot listen on %s:%d (%s); the hooks keep spooling; the live view, "
                          "`sessions` and the dashboard are unavailable until it can", self.config.host,
                          self.config.port, exc.strerror or exc)
                return
            server = moved
        else:
            if self._paths is not None:
                port_moves.clear(self._paths)
        if self._paths is not None:
            record_port(self._paths, server.port)
        self.server, self.relay, self.otlp = server, relay, otlp

    async def _elsewhere(self, exc: OSError, submit: Any,
                         snapshot: Callable[[], dict[str, Any]]) -> IngestServer | None:
        """The port is taken (by another user, maybe: a neighbour who bound it while we restarted): listen
        on a free port of the range instead, and say so (logged, and kept for `status` and `doctor`).
        The hooks append to the spool and never use the port; our clients read the port recorded here."""
        if exc.errno != errno.EADDRINUSE:
            return None
        taken = self.config.port
        owner = listener_uid(taken)
        port = choose_port(lambda p: p != taken and port_is_free(p))
        server = IngestServer(submit, self._known_agents, snapshot, dataclasses.replace(self.config, port=port),
                              routes=self._routes, body_routes=self._body_routes)
        try:
            await server.start()
        except OSError:
            return None
        who = f"another user (uid {owner})" if owner is not None and owner != os.getuid() else "another program"
        log.warning("ingest port %d is held by %s; listening on %d instead (recorded for our clients; the hooks "
                    "spool and are not affected)", taken, who, server.port)
        if self._paths is not None:
            port_moves.record(self._paths, taken, server.port, owner)
        return server

    async def stop(self) -> None:
        server, relay, self.server, self.relay = self.server, self.relay, None, None
        if server is not None:
            await server.stop()
        if relay is not None:
            relay.close()
        if self._forwarder is not None:
            self._forwarder.close()
