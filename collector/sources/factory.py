"""Build the sources an agent definition lists. One builder per source kind."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collector.definitions import AgentDefinition
from collector.paths import Paths
from collector.sources.base import Source
from collector.sources.jsonl_files import JsonlFiles

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BuildContext:
    paths: Paths
    positions: dict[str, dict[str, Any]]
    max_line: int


Builder = Callable[[AgentDefinition, dict[str, Any], BuildContext], Source]


def _spool(defn: AgentDefinition, spec: dict[str, Any], ctx: BuildContext) -> Source:
    pattern = str(ctx.paths.spool_dir / defn.id / "*.jsonl")
    return JsonlFiles(f"{defn.id}:{spec.get('name', 'hooks')}", defn.id, "hook", [pattern], ctx.positions, ctx.max_line)


def _jsonl(defn: AgentDefinition, spec: dict[str, Any], ctx: BuildContext) -> Source:
    globs = [str(ctx.paths.expand(g)) for g in spec["globs"]]
    name = f"{defn.id}:{spec.get('name', 'transcripts')}"
    return JsonlFiles(name, defn.id, str(spec.get("record_kind", "transcript")), globs, ctx.positions, ctx.max_line)


BUILDERS: dict[str, Builder] = {"spool": _spool, "jsonl": _jsonl}


def register_builder(kind: str, builder: Builder) -> None:
    BUILDERS[kind] = builder


def _load_optional_builders() -> None:
    """Source kinds implemented in their own modules register themselves on import."""
    for module in ("collector.sources.sqlite_rows", "collector.sources.json_documents", "collector.sources.commands"):
        try:
            __import__(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


def build_sources(defn: AgentDefinition, ctx: BuildContext) -> list[Source]:
    _load_optional_builders()
    sources: list[Source] = []
    for spec in defn.sources:
        builder = BUILDERS.get(spec["kind"])
        if builder is None:
            log.warning("%s: source kind %r is not supported by this build, skipped", defn.id, spec["kind"])
            continue
        sources.append(builder(defn, spec, ctx))
    return sources
