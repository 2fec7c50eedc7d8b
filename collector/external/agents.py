"""External agent plugins as agents of the collector: with ``[external_agents] enabled = true``, each
plugin that discovery accepts becomes an agent (its id and ``gen_ai.agent.type`` are the plugin's name,
its parser ``entire_plugin``) with one :class:`~collector.external.source.ExternalSource`. Off, nothing is
scanned and nothing is run."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from collector.config import ExternalAgentsSection
from collector.definitions import AgentDefinition
from collector.external.discovery import discover
from collector.external.hooks import HookEvents
from collector.external.plugin import Caller, ExternalPlugin
from collector.external.source import ExternalSource
from collector.paths import Paths
from collector.sources.base import Source
from collector.sources.jsonl_files import JsonlFiles
from collector.sources.process import Limits
from collector.sources.spool_lines import decode_spool_line

STDERR_CAP = 64 * 1024


@dataclass(slots=True)
class ExternalAgents:
    section: ExternalAgentsSection
    repos: list[str] = field(default_factory=list)
    plugins: list[ExternalPlugin] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def definitions(self) -> dict[str, AgentDefinition]:
        return {p.name: AgentDefinition(p.name, _definition(p), (p.path,)) for p in self.plugins}

    def sources(self, paths: Paths, positions: dict[str, dict[str, Any]], max_line: int) -> list[Source]:
        limits = Limits(self.section.timeout_s, self.section.max_output_bytes, STDERR_CAP)
        out: list[Source] = []
        for p in self.plugins:
            out.append(ExternalSource(p, self.repos, Caller(limits), self.section.interval_s, positions))
            if p.allows("parse-hook"):
                spool = JsonlFiles(f"{p.name}:hooks", p.name, "hook", [str(paths.spool_dir / p.name / "*.jsonl")],
                                   positions, max_line, decode=decode_spool_line)
                out.append(HookEvents(spool, p, Caller(limits), self.repos[0] if self.repos else str(paths.home)))
        return out

    def status(self) -> dict[str, Any]:
        return {"enabled": self.section.enabled, "repos": self.repos,
                "plugins": {p.name: {"path": p.path, "type": p.info.get("type"),
                                     "capabilities": sorted(k for k, v in p.capabilities.items() if v is True)}
                            for p in self.plugins},
                "skipped": list(self.skipped)}


def load_external(section: ExternalAgentsSection, paths: Paths, known: Iterable[str],
                  env: Mapping[str, str] = os.environ) -> ExternalAgents:
    found = ExternalAgents(section)
    if not section.enabled:
        return found
    found.repos = [str(paths.expand(r)) for r in section.repos]
    where = found.repos[0] if found.repos else str(paths.home)
    discovery = discover(env.get("PATH", ""), known, where, section.max_output_bytes, section.plugins)
    found.plugins, found.skipped = discovery.plugins, discovery.skipped
    return found


def status_rules() -> dict[str, Any]:
    """The protocol's events as status actions (what the agents.d ``status`` section says for hook agents)."""
    return {"payload_fields": {"session_id": ["session_id"]},
            "events": {"SessionStart": "start", "TurnStart": "prompt", "TurnEnd": "settle", "SessionEnd": "end",
                       "Compaction": "activity", "SubagentStart": "activity", "SubagentEnd": "activity"}}


def _definition(plugin: ExternalPlugin) -> dict[str, Any]:
    return {"id": plugin.name, "name": str(plugin.info.get("type") or plugin.name), "parser": "entire_plugin",
            "detect": {}, "integrations": [], "sources": [], "status": status_rules(),
            "notes": f"Entire external agent plugin {plugin.path}"}
