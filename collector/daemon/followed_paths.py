"""Transcript files a hook names: a hook payload field (a definition's ``hook_path_field``, e.g. Claude
Code's ``transcript_path``) names the file the agent writes; the pipeline reports the paths it saw
(``discovered_paths``) and the agent's transcript source follows them from then on, also when they lie
outside the folders its globs watch (the source decides what it accepts)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from collector.definitions import AgentDefinition
from collector.sources.base import Source
from collector.sources.jsonl_files import JsonlFiles

log = logging.getLogger("collector")  # the daemon's lines, as the Service's


def hook_path_fields(defn: AgentDefinition) -> tuple[str, ...]:
    """The hook payload fields of ``defn`` that name a transcript file (the pipeline reads them)."""
    return tuple(s["hook_path_field"] for s in defn.sources if s.get("hook_path_field"))


@dataclass(slots=True)
class FollowedPaths:
    """Owns which source follows the paths hooks name, per agent: its first transcript source (JSONL
    files of kind ``transcript``); an agent without one follows nothing."""

    by_agent: dict[str, JsonlFiles] = field(default_factory=dict)

    def refresh(self, sources: Sequence[Source]) -> None:
        """The sources changed (start-up, external agents joining)."""
        self.by_agent = {}
        for source in sources:
            if isinstance(source, JsonlFiles) and source.kind == "transcript":
                self.by_agent.setdefault(source.agent, source)

    def follow(self, discovered: Iterable[tuple[str, str]]) -> None:
        """(agent, path) pairs the pipeline found in hook payloads."""
        for agent, path in discovered:
            source = self.by_agent.get(agent)
            if source is not None and source.add_path(path):
                log.info("%s: following %s (named by a hook)", agent, path)
