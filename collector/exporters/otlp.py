"""Entry point for the service: settings -> one durable, queued exporter per backend and signal."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from collector.exporters.base import Exporter
from collector.exporters.otlp_common import ResourceCache, make_sdk_exporter
from collector.exporters.otlp_config import BackendConfig, SignalConfig, load_otlp_config
from collector.exporters.otlp_logs import OtlpLogsExporter
from collector.exporters.otlp_metrics import OtlpMetricsExporter
from collector.exporters.otlp_traces import OtlpTracesExporter
from collector.exporters.queue import QueuedExporter, QueueOptions
from collector.paths import Paths

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def exporter_name(backend: str, signal: str) -> str:
    return f"otlp-{_SAFE.sub('_', backend)}-{signal}"


def build_signal_exporter(
    backend: BackendConfig,
    signal: SignalConfig,
    paths: Paths,
    options: QueueOptions | None = None,
) -> QueuedExporter:
    """One signal of one backend, wrapped in its own durable queue under ``paths.queue_dir``."""
    name = exporter_name(backend.name, signal.signal)
    queue_dir = paths.queue_dir / name
    resources = ResourceCache(backend.resource_attributes)
    sdk = make_sdk_exporter(signal)
    inner: Exporter
    if signal.signal == "logs":
        inner = OtlpLogsExporter(name, sdk, resources)
    elif signal.signal == "traces":
        inner = OtlpTracesExporter(
            name,
            sdk,
            resources,
            queue_dir,
            idle_timeout_s=backend.turn_idle_timeout_s,
            grace_s=backend.turn_grace_s,
        )
    else:
        inner = OtlpMetricsExporter(name, sdk, resources)
    cap = max(1, backend.queue_cap_bytes // max(1, len(backend.signals)))  # the backend's cap, shared
    return QueuedExporter(inner, queue_dir, cap_bytes=cap, options=options)


def build_otlp_exporters(
    config: Mapping[str, Any] | None,
    env: Mapping[str, str],
    paths: Paths,
    options: QueueOptions | None = None,
) -> list[Exporter]:
    """Every configured OTLP exporter, already behind its durable queue (empty when OTLP is not set up).

    Raises ``OtlpConfigError`` for unusable settings and ``ExportError`` when gRPC is asked for without
    the ``grpc`` extra installed.
    """
    exporters: list[Exporter] = []
    for backend in load_otlp_config(config, env):
        for signal in backend.signals.values():
            exporters.append(build_signal_exporter(backend, signal, paths, options))
    return exporters
