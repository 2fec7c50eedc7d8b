"""Exporters: the registry (kind -> schema of its config.toml section -> build function).

A kind's build function gets its ``config.toml`` section (a dict, defaults filled in, checked against
the section's part of ``schemas/config.schema.json``) and an :class:`ExporterContext`, and returns the
exporters it makes: none when disabled, one per backend and signal for OTLP. Built-in kinds, in the
order they receive a batch: ``jsonl``, ``store`` (the usage store), ``otlp``. An installed package adds
kinds under the entry point group ``agent_collector.exporters``; its section is not part of config.toml,
so it is built from its schema's defaults.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from collector.config import Config, ConfigError, schema
from collector.exporters.base import Exporter
from collector.exporters.jsonl import JsonlExporter
from collector.exporters.usage import build_usage_exporter
from collector.paths import Paths
from collector.pipeline.quarantine import Quarantine
from collector.registry import Plugin, PluginConfigError, Registry


@dataclass(frozen=True, slots=True)
class ExporterContext:
    config: Config
    paths: Paths
    output_dir: Path
    state: Callable[[str, Any], Any]  # the checkpoint store's saved value of a key (exporter marks)
    env: Mapping[str, str]
    delivered: Callable[[Iterable[str]], set[str]] | None = None  # the ids the checkpoint store holds
    quarantine: Quarantine | None = None  # the daemon's (status counts what exporters put there)


ExporterBuilder = Callable[[dict[str, Any], ExporterContext], list[Exporter]]


def section_schema(name: str) -> dict[str, Any]:
    """The schema of one config.toml section, as a schema of its own."""
    full = schema()
    return {**full["properties"][name], "$defs": full.get("$defs", {})}


def _jsonl(section: dict[str, Any], ctx: ExporterContext) -> list[Exporter]:
    if not section["enabled"]:
        return []
    return [JsonlExporter(ctx.output_dir, ctx.state("exporter.jsonl", {}), ctx.delivered,
                          field_names=section.get("field_names", "ours"))]


def _store(section: dict[str, Any], ctx: ExporterContext) -> list[Exporter]:
    usage = build_usage_exporter({"store": section}, ctx.paths.data_dir, ctx.output_dir)
    return [] if usage is None else [usage]


def _otlp(section: dict[str, Any], ctx: ExporterContext) -> list[Exporter]:
    if not (section.get("enabled") or section.get("backends") or section.get("endpoint")
            or any(k.startswith("OTEL_EXPORTER_OTLP_") for k in ctx.env)):
        return []  # no backend named anywhere: the OpenTelemetry SDK is not even loaded
    from collector.exporters.otlp import build_otlp_exporters  # deferred: the SDK costs start-up time
    from collector.exporters.otlp_config import OtlpConfigError

    try:
        return build_otlp_exporters(section, ctx.env, ctx.paths, quarantine=ctx.quarantine)
    except OtlpConfigError as exc:
        raise ConfigError(f"otlp: {exc}") from exc


@cache
def exporters() -> Registry[ExporterBuilder]:
    builtin: list[Plugin[ExporterBuilder]] = [
        Plugin("jsonl", _jsonl, section_schema("jsonl")),
        Plugin("store", _store, section_schema("store")),
        Plugin("otlp", _otlp, section_schema("otlp")),
    ]
    return Registry("exporter", builtin, group="agent_collector.exporters")


def config_section(config: Config, kind: str) -> dict[str, Any]:
    value = getattr(config, kind, None)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return dict(value) if isinstance(value, Mapping) else {}


def build_exporters(ctx: ExporterContext) -> list[Exporter]:
    """Every exporter the configuration turns on, in registration order."""
    out: list[Exporter] = []
    registry = exporters()
    for kind in registry.kinds_in_order():
        try:
            out += registry.build(kind, config_section(ctx.config, kind), ctx)
        except PluginConfigError as exc:
            raise ConfigError(str(exc)) from exc
    return out
