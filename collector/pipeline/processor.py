"""The pipeline proper: raw records in, finished entries out.

parse (agent parser) -> dedupe -> enrich -> correlate -> status -> content policy -> masking.
Nothing here knows a particular agent; parsers are looked up by the record's agent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from collector.agents import Parser
from collector.model import RawRecord
from collector.pipeline.content_policy import ContentPolicy
from collector.pipeline.correlate import Correlator
from collector.pipeline.dedupe import Deduper
from collector.pipeline.masking import mask_entry

log = logging.getLogger(__name__)


class StatusObserver(Protocol):
    def observe(self, entry: dict[str, Any], record: RawRecord | None) -> list[dict[str, Any]]:
        """Return new ``session.status`` entries caused by ``entry`` (and its hook record, if any)."""

    def observe_record(self, record: RawRecord) -> list[dict[str, Any]]:
        """Return new ``session.status`` entries caused by a hook record that made no entry."""


@dataclass(slots=True)
class AgentSettings:
    parser: Parser
    capture: bool = False
    provider: str | None = None  # the definition's: gen_ai.provider.name of model calls that do not name one
    path_fields: tuple[str, ...] = ()  # hook payload fields naming files a source should follow


@dataclass(slots=True)
class PipelineStats:
    records: int = 0
    entries: int = 0
    duplicates: int = 0
    parse_errors: int = 0
    unknown_agent: int = 0
    by_event: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class Output:
    entries: list[dict[str, Any]]
    discovered_paths: list[tuple[str, str]]  # (agent, path)


class Pipeline:
    def __init__(
        self,
        agents: dict[str, AgentSettings],
        resource: dict[str, str],
        seen_in_store: Callable[[Iterable[str]], set[str]],
        correlator: Correlator,
        masking: bool = True,
        status: StatusObserver | None = None,
        content: ContentPolicy | None = None,
    ) -> None:
        self.agents = agents
        self.resource = resource
        self.deduper = Deduper(seen_in_store)
        self.correlator = correlator
        self.masking = masking
        self.status = status
        self.content = content if content is not None else ContentPolicy.ephemeral()
        self.stats = PipelineStats()

    def process(self, records: Iterable[RawRecord]) -> Output:
        parsed: list[tuple[RawRecord, list[dict[str, Any]]]] = []
        paths: list[tuple[str, str]] = []
        for record in records:
            self.stats.records += 1
            settings = self.agents.get(record.agent)
            if settings is None:
                self.stats.unknown_agent += 1
                continue
            if record.kind == "hook" and settings.path_fields:
                paths.extend(_discovered(record, settings.path_fields))
            parsed.append((record, [e.to_dict() for e in self._parse(settings, record)]))
        fresh_ids = {e["event.id"] for e in self.deduper.fresh([e for _, es in parsed for e in es])}
        out: list[dict[str, Any]] = []
        for record, entries in parsed:
            emitted = False
            for entry in entries:
                if entry["event.id"] not in fresh_ids:
                    self.stats.duplicates += 1
                    continue
                fresh_ids.discard(entry["event.id"])  # a second copy within the batch is a duplicate too
                out.append(self._finish(entry))
                emitted = True
                self._observe_status(out, entry, record)
            if not emitted and record.kind == "hook" and self.status is not None:
                self._emit_status(out, self.status.observe_record(record))
        return Output(out, paths)

    def finish(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Entries made by the collector itself (the idle rule): deduped and finished like parsed ones."""
        return [self._finish(e) for e in self.deduper.fresh(entries)]

    def _observe_status(self, out: list[dict[str, Any]], entry: dict[str, Any], record: RawRecord) -> None:
        if self.status is not None:
            self._emit_status(out, self.status.observe(entry, record if record.kind == "hook" else None))

    def _emit_status(self, out: list[dict[str, Any]], extra: list[dict[str, Any]]) -> None:
        out.extend(self._finish(e) for e in self.deduper.fresh(extra))

    def _parse(self, settings: AgentSettings, record: RawRecord) -> list[Any]:
        try:
            return settings.parser(record)
        except Exception as exc:  # a parser bug must not stop the neighbours
            self.stats.parse_errors += 1
            log.warning("%s %s record at %s:%s could not be parsed: %r", record.agent, record.kind,
                        record.meta.get("path", record.source_id), record.position, exc)
            return []

    def _finish(self, entry: dict[str, Any]) -> dict[str, Any]:
        agent = entry["gen_ai.agent.type"]
        settings = self.agents.get(agent)
        for key, value in self.resource.items():
            entry.setdefault(key, value)
        if settings and settings.provider and _calls_the_model(entry):
            entry.setdefault("gen_ai.provider.name", settings.provider)
        self.correlator.apply(entry)
        self.content.apply(entry, settings.capture if settings else False)
        if self.masking:
            mask_entry(entry)
        self.stats.entries += 1
        name = entry["event.name"]
        self.stats.by_event[name] = self.stats.by_event.get(name, 0) + 1
        return entry


def _discovered(record: RawRecord, fields: tuple[str, ...]) -> list[tuple[str, str]]:
    payload = record.data.get("payload")
    if not isinstance(payload, dict):
        return []
    return [(record.agent, payload[f]) for f in fields if isinstance(payload.get(f), str) and payload[f]]


def _calls_the_model(entry: dict[str, Any]) -> bool:
    """A model call, or a model API failure (an error with the API's HTTP status)."""
    name = entry["event.name"]
    return name in ("llm.request", "llm.response") or (name == "error" and "http.response.status_code" in entry)
