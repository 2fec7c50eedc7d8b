"""What a source kind's build function gets: the agent's definition, the source's spec (defaults filled
in, checked against the kind's schema) and this context."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collector.definitions import AgentDefinition
from collector.paths import Paths
from collector.sources.base import Source


@dataclass(frozen=True, slots=True)
class BuildContext:
    paths: Paths
    positions: dict[str, dict[str, Any]]
    max_line: int


SourceBuilder = Callable[[dict[str, Any], AgentDefinition, BuildContext], Source]  # (spec, definition, context)
