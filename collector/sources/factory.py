"""Source kinds: the registry (kind -> schema -> build function) and the sources an agent definition lists.

Built-in kinds: ``spool`` and ``jsonl`` (here), ``sqlite`` (sqlite_rows), ``json_file``
(json_documents), ``command`` (commands), ``otlp`` and ``otlp_file`` (otlp_files). An installed package
adds kinds under the entry point group ``agent_collector.source_kinds``. A spec of an unknown kind, or one
that breaks its kind's schema, is logged and skipped; the agent's other sources still run.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

import collector.sources.commands as commands
import collector.sources.json_documents as json_documents
import collector.sources.otlp_files as otlp_files
import collector.sources.sqlite_rows as sqlite_rows
from collector.definitions import AgentDefinition
from collector.definitions.schema import kind_schema
from collector.registry import Plugin, PluginConfigError, Registry, UnknownKind
from collector.sources.base import Source
from collector.sources.context import BuildContext, SourceBuilder
from collector.sources.jsonl_files import JsonlFiles
from collector.sources.line_filter import LineFilter
from collector.sources.spool_lines import decode_spool_line

log = logging.getLogger(__name__)

__all__ = ["BuildContext", "build_sources", "source_kinds"]


def _spool(spec: dict[str, Any], defn: AgentDefinition, ctx: BuildContext) -> Source:
    pattern = str(ctx.paths.spool_dir / defn.id / "*.jsonl")
    name = f"{defn.id}:{spec['name']}"
    return JsonlFiles(name, defn.id, "hook", [pattern], ctx.positions, ctx.max_line, decode=decode_spool_line)


def _jsonl(spec: dict[str, Any], defn: AgentDefinition, ctx: BuildContext) -> Source:
    globs = [str(ctx.paths.expand(g)) for g in spec["globs"]]
    return JsonlFiles(f"{defn.id}:{spec['name']}", defn.id, spec["record_kind"], globs, ctx.positions, ctx.max_line,
                      skip=LineFilter.of(spec.get("decode_only")))


@cache
def source_kinds() -> Registry[SourceBuilder]:
    builtin: list[Plugin[SourceBuilder]] = [
        Plugin("spool", _spool, kind_schema("source_spool")),
        Plugin("jsonl", _jsonl, kind_schema("source_jsonl")),
        sqlite_rows.PLUGIN,
        json_documents.PLUGIN,
        commands.PLUGIN,
        *otlp_files.PLUGINS,
    ]
    return Registry("source kind", builtin, group="agent_collector.source_kinds")


OWN_TELEMETRY = ("otlp", "otlp_file")  # the agent's own telemetry: read after its files and hooks


def build_sources(defn: AgentDefinition, ctx: BuildContext) -> list[Source]:
    """The definition's sources in its order, but its own telemetry last: a cycle that finds both (a
    backfill, a rebuild, `collect --once`) then pairs the telemetry with the file's entry of the call, so
    the call keeps the file's ``event.id`` as a live daemon that read the file first gave it (docs/merge.md)."""
    sources: list[Source] = []
    specs = sorted(enumerate(defn.sources), key=lambda item: item[1].get("kind") in OWN_TELEMETRY)
    for n, spec in specs:
        try:
            sources.append(source_kinds().build(spec["kind"], spec, defn, ctx))
        except (UnknownKind, PluginConfigError) as exc:
            log.error("%s: sources[%d] skipped: %s", defn.id, n, exc)
    return sources
