"""What ``agent-collector run`` adds to the Service: the optional daemon parts, each built with what it
needs from the started Service (the CLI is the one place that knows both)."""

from __future__ import annotations

import logging
from typing import Any

from collector.daemon.parts import DaemonPart
from collector.daemon.service import Service
from collector.dashboard.live import dashboard_route
from collector.deploy import autodeploy, consent, watchdog
from collector.deploy.autodeploy import AutoDeployPart
from collector.deploy.watchdog import WatchdogPart
from collector.exporters.passthrough import Forwarder, targets_from
from collector.ingest.live import IngestPart, ingest_config, live_snapshot
from collector.sources.otlp_files import otlp_service_agents

log = logging.getLogger(__name__)


def _forwarder(service: Service) -> Forwarder | None:
    """The pass-through to the backends users had for their agents' telemetry (install --telemetry)."""
    from collector.deploy.telemetry_choice import forward_targets

    targets = targets_from(forward_targets(service.paths))
    if not targets:
        return None
    log.info("the agents' own telemetry is forwarded to the user's backend for %s", ", ".join(sorted(targets)))
    return Forwarder(targets, service.paths.queue_dir / "passthrough")


def daemon_parts(service: Service) -> list[DaemonPart]:
    """The parts the configuration turns on, for a Service whose ``startup`` has run."""
    parts: list[DaemonPart] = []
    if service.config.ingest.enabled:
        def snapshot() -> dict[str, Any]:
            return service.with_state(lambda: live_snapshot(service.snapshot(), service.status))

        parts.append(IngestPart(ingest_config(service.config, service.paths), service.spool_writer,
                                lambda: set(service.definitions), snapshot,
                                routes=[dashboard_route(service.paths, service.config, snapshot)],
                                paths=service.paths,
                                service_agents=lambda: otlp_service_agents(list(service.definitions.values())),
                                forwarder=_forwarder(service)))
    if service.config.deploy.auto and consent.given(service.paths):  # install (or run --deploy) asked for it
        parts.append(AutoDeployPart(service.definitions, service.paths, service.config.deploy.rescan_s,
                                    service.state_slot(autodeploy.STATE_KEY)))
    if service.config.watchdog.enabled:
        parts.append(WatchdogPart(service.definitions, service.paths, service.config.watchdog,
                                  service.state_slot(watchdog.STATE_KEY)))
    if service.config.deploy.auto and not consent.given(service.paths):
        log.info("auto-deploy is off: `agent-collector install` has not run for this user (or `run --deploy`)")
    return parts
