"""Entry point for the service: settings -> one durable, queued exporter per backend and signal."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from collector.exporters.base import Exporter
from collector.exporters.otlp_common import PoisonSink, ResourceCache
from collector.exporters.otlp_config import BackendConfig, SignalConfig, load_otlp_config
from collector.exporters.otlp_logs import OtlpLogsExporter
from collector.exporters.otlp_metrics import OtlpMetricsExporter
from collector.exporters.otlp_send import make_sender
from collector.exporters.otlp_traces import OtlpTracesExporter
from collector.exporters.queue import QueuedExporter, QueueOptions, SegmentLog, new_log
from collector.model.raw import RawRecord
from collector.paths import Paths
from collector.pipeline.quarantine import Quarantine, quarantine_dir
from collector.state.checkpoints import CHECKPOINTS_FILE, CheckpointStore, KeyState

LEGACY_STATE_FILE = "traces-state.json"

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def exporter_name(backend: str, signal: str) -> str:
    return f"otlp-{_SAFE.sub('_', backend)}-{signal}"


def build_signal_exporter(
    backend: BackendConfig,
    signal: SignalConfig,
    paths: Paths,
    options: QueueOptions | None = None,
    store: CheckpointStore | None = None,
    quarantine: Quarantine | None = None,
    shared: SegmentLog | None = None,
) -> QueuedExporter:
    """One signal of one backend behind its durable queue: a consumer of the backend's log (``shared``,
    under ``paths.queue_dir / "otlp" / <backend>``), draining first the directory an older version kept
    for the signal alone. A trace exporter keeps its open turns in the checkpoint store (``store``, else
    the one under ``paths``), a metric exporter its cumulative series."""
    name = exporter_name(backend.name, signal.signal)
    queue_dir = paths.queue_dir / name  # where older versions queued this signal alone
    options = options or QueueOptions()
    if shared is None:
        shared = backend_log(backend, paths, options)
    resources = ResourceCache(backend.resource_attributes)
    sender = make_sender(signal)
    poison = quarantine_sink(quarantine or Quarantine(quarantine_dir(paths)), name)
    inner: Exporter
    if signal.signal == "logs":
        inner = OtlpLogsExporter(name, sender, resources, poison, backend.semconv)
    elif signal.signal == "traces":
        state = KeyState(store or _store(paths), f"exporter.{name}")
        state.adopt(queue_dir / LEGACY_STATE_FILE)  # open turns an older version kept beside its queue
        inner = OtlpTracesExporter(
            name,
            sender,
            resources,
            state,
            idle_timeout_s=backend.turn_idle_timeout_s,
            grace_s=backend.turn_grace_s,
            poison=poison,
            names=backend.semconv,
        )
    else:
        series = KeyState(store or _store(paths), f"exporter.{name}")
        inner = OtlpMetricsExporter(name, sender, resources, poison, series, backend.semconv)
    legacy = queue_dir if any(queue_dir.glob("seg-*.jsonl")) else None
    return QueuedExporter(inner, shared.dir, options=options, poison=poison, log=shared, consumer=signal.signal,
                          legacy=legacy)


def backend_log(backend: BackendConfig, paths: Paths, options: QueueOptions) -> SegmentLog:
    """The one segment log of a backend: each batch is written once for all its signals."""
    directory = paths.queue_dir / "otlp" / _SAFE.sub("_", backend.name)
    return new_log(directory, backend.queue_cap_bytes, list(backend.signals), options)


def quarantine_sink(quarantine: Quarantine, exporter: str) -> PoisonSink:
    """Poison of an OTLP exporter to the dead-letter file: where (the exporter, the entry's event id) and
    why, never the entry's data (its content, if the policy kept any, is in the JSONL output already)."""

    def sink(entry: dict[str, Any], reason: str) -> None:
        ident = str(entry.get("event.id") or entry.get("otlp.span.id") or "")
        meta = {k: str(v) for k, v in entry.items() if k in ("event.id", "event.name", "otlp.span.id")}
        record = RawRecord(str(entry.get("gen_ai.agent.type") or "unknown"), f"otlp.{exporter.rsplit('-', 1)[-1]}",
                           {}, f"otlp:{exporter}", ident, time.time_ns(), {**meta, "exporter": exporter})
        quarantine.add(record, "export", reason, keep_data=False)

    return sink


def build_otlp_exporters(
    config: Mapping[str, Any] | None,
    env: Mapping[str, str],
    paths: Paths,
    options: QueueOptions | None = None,
    quarantine: Quarantine | None = None,
) -> list[Exporter]:
    """Every configured OTLP exporter, already behind its durable queue (empty when OTLP is not set up).
    Poison goes to ``quarantine`` (the daemon's, so ``status`` counts it), else to one of their own.

    Raises ``OtlpConfigError`` for unusable settings and ``ExportError`` when gRPC is asked for without
    the ``grpc`` extra installed.
    """
    exporters: list[Exporter] = []
    backends = load_otlp_config(config, env)
    store = _store(paths) if any({"traces", "metrics"} & set(b.signals) for b in backends) else None
    if quarantine is None and backends:
        quarantine = Quarantine(quarantine_dir(paths))
    for backend in backends:
        shared = backend_log(backend, paths, options or QueueOptions())
        for signal in backend.signals.values():
            exporters.append(build_signal_exporter(backend, signal, paths, options, store, quarantine, shared))
    return exporters


def _store(paths: Paths) -> CheckpointStore:
    return CheckpointStore(paths.state_dir / CHECKPOINTS_FILE)
