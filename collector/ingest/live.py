"""The live view as a daemon part (:class:`collector.parts.DaemonPart`): the loopback ingest server,
whose posted hooks go to the spool through one writer thread, and which serves the live snapshot (the
Service's status plus the session status tracker's sessions). ``agent-collector run`` builds it."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from collector.config import Config
from collector.ingest.envelope import to_envelope
from collector.ingest.secret import ensure_token, ingest_port, record_port
from collector.ingest.server import IngestConfig, IngestServer, Route
from collector.paths import Paths
from collector.pipeline.status import SessionStatusTracker
from collector.sources.spool_writer import SpoolWriter

log = logging.getLogger(__name__)


def ingest_config(config: Config, paths: Paths) -> IngestConfig:
    """The user's secret (made now if missing) and port (configured, or chosen per user and kept)."""
    return IngestConfig(token=ensure_token(paths), port=ingest_port(paths, config.ingest.port),
                        max_body_bytes=config.ingest.max_body_bytes)


def live_snapshot(snapshot: dict[str, Any], tracker: SessionStatusTracker | None) -> dict[str, Any]:
    """The Service's status snapshot with the live sessions added."""
    if tracker is not None:
        snapshot["sessions"] = tracker.sessions()
        snapshot["session_status"] = tracker.summary()
    return snapshot


class SpoolRelay:
    """Appends posted hooks to the spool from one writer thread, in arrival order, so the fdatasync of
    each line is off the event loop and out of the hook's answer time. Bounded: when the writer falls
    ``capacity`` lines behind, ``put`` raises and the server answers 503."""

    def __init__(self, writer: SpoolWriter, capacity: int = 10_000) -> None:
        self._writer = writer
        self._queue: queue.Queue[tuple[str, str, Any, float] | None] = queue.Queue(capacity)
        self._thread = threading.Thread(target=self._run, name="spool-relay", daemon=True)
        self._thread.start()
        self.written = 0
        self.failed = 0

    def put(self, agent: str, event: str, payload: Any, received: float) -> None:
        try:
            self._queue.put_nowait((agent, event, payload, received))
        except queue.Full:
            raise RuntimeError("the spool writer is behind") from None

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                self._writer.append(*item)
                self.written += 1
            except OSError as exc:
                self.failed += 1
                log.error("cannot append a %s hook to the spool: %s", item[0], exc.strerror or exc)
            finally:
                self._queue.task_done()

    def flush(self) -> None:
        """Block until every line put so far is written."""
        self._queue.join()

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued, then stop."""
        self._queue.put(None)
        self._thread.join(timeout)


class IngestPart:
    """The ingest server and its spool relay. A port already taken is logged, not fatal: command hooks
    still spool. Posted hooks go to the spool (durable, read by the same spool source as the hook
    script's lines); the spool directory's file events wake the collection loop."""

    name = "ingest"

    def __init__(self, config: IngestConfig, spool_writer: SpoolWriter, known_agents: Callable[[], set[str]],
                 snapshot: Callable[[], dict[str, Any]], routes: Sequence[Route] = (),
                 paths: Paths | None = None) -> None:
        self.config = config
        self._routes = list(routes)  # extra routes: the dashboard
        self._paths = paths  # where the port in effect is recorded (<state dir>/ingest.port)
        self._writer = spool_writer
        self._known_agents = known_agents
        self._snapshot = snapshot
        self.server: IngestServer | None = None
        self.relay: SpoolRelay | None = None

    async def start(self) -> None:
        relay = SpoolRelay(self._writer)

        def submit(agent: str, body: bytes, received: float) -> None:
            envelope = to_envelope(agent, body, received)
            relay.put(agent, envelope["event"] or "", envelope["payload"], received)

        server = IngestServer(submit, self._known_agents, self._snapshot, self.config, routes=self._routes)
        try:
            await server.start()
        except OSError as exc:
            relay.close()
            log.error("ingest server cannot listen on %s:%d (%s); http hooks are lost until it can, "
                      "command hooks keep spooling; if another program holds the port, set ingest.port, or "
                      "delete <state dir>/ingest.port and run `agent-collector install` to choose another",
                      self.config.host, self.config.port, exc.strerror or exc)
            return
        if self._paths is not None:
            record_port(self._paths, server.port)
        self.server, self.relay = server, relay

    async def stop(self) -> None:
        server, relay, self.server, self.relay = self.server, self.relay, None, None
        if server is not None:
            await server.stop()
        if relay is not None:
            relay.close()
