"""The pipeline proper: raw records in, finished entries out.

boundary check -> declared field types (collector.pipeline.field_types) -> parse (agent parser) -> merge (one model
call one llm.response, collector.pipeline.merge) -> dedupe ->
boundary check -> enrich -> correlate -> turns (``turn.key``/``turn.ends``, collector.pipeline.turns) ->
upstream turn links (collector.pipeline.turn_links) -> status -> content policy -> masking -> encode check.
A record failing at any stage is quarantined (collector.pipeline.quarantine); its neighbours go on.
Nothing here knows a particular agent; parsers are looked up by the record's agent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import orjson

from collector.agents import Parser
from collector.model import AgentActivityEntry, RawRecord
from collector.model.boundary import check_entry, check_record
from collector.model.entry import UNREADABLE
from collector.model.raw import TRUNCATED
from collector.pipeline.attributes import EntryStamper
from collector.pipeline.content_policy import ContentPolicy
from collector.pipeline.correlate import Correlator
from collector.pipeline.crash_guard import CrashGuard
from collector.pipeline.dedupe import Deduper
from collector.pipeline.field_types import FieldTypes
from collector.pipeline.invocation import Invocations
from collector.pipeline.masking import Masker, default_masker
from collector.pipeline.merge import Merger, Review
from collector.pipeline.quarantine import Due, Quarantine, describe
from collector.pipeline.turn_links import TurnLinks
from collector.pipeline.turns import TurnMarker
from collector.pipeline.workspace import WorkspaceRoots

log = logging.getLogger(__name__)
_T = TypeVar("_T")


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
    # the definition's types of the fields its parser dispatches on (collector.pipeline.field_types)
    field_types: FieldTypes | None = None


@dataclass(slots=True)
class PipelineStats:
    records: int = 0
    entries: int = 0
    duplicates: int = 0
    corrections: int = 0  # model calls delivered again with more exact usage (collector.pipeline.merge)
    parse_errors: int = 0
    unknown_agent: int = 0
    quarantined: int = 0
    by_event: dict[str, int] = field(default_factory=dict)
    # model calls (llm.response) whose agent record named no model, per agent: a parser gap, not a normal
    # case (reports can then price them only by the session's model, if it has one)
    without_model: dict[str, int] = field(default_factory=dict)
    # entries whose own time was not a plausible time (a wrong clock or unit) and now carry the observed
    # time (``collector.time_replaced``), per agent
    times_replaced: dict[str, int] = field(default_factory=dict)
    # parts of records a parser had to leave out, per "<agent>: <reason>" (``collector.agents.common.unreadable``)
    unreadable: dict[str, int] = field(default_factory=dict)
    # records nested deeper than the boundary's MAX_DEPTH, read with their deepest parts cut, per agent
    truncated: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class Output:
    entries: list[dict[str, Any]]
    discovered_paths: list[tuple[str, str]]  # (agent, path)
    origins: list[tuple[int, RawRecord]] = field(default_factory=list)  # (first entry's index, its record)
    lines: list[bytes] | None = None  # each entry's JSON, as the encode check made it (exporters reuse it)


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
        quarantine: Quarantine | None = None,
        turns: TurnMarker | None = None,
        masker: Masker | None = None,
        guard: CrashGuard | None = None,
        workspaces: WorkspaceRoots | None = None,
        stampers: Sequence[EntryStamper] = (),
        invocations: Invocations | None = None,
        drop_agent_fields: bool = False,
        turn_links: TurnLinks | None = None,
    ) -> None:
        self.agents = agents
        self.resource = resource
        self.deduper = Deduper(seen_in_store)
        self.merger = Merger()
        self.correlator = correlator
        self.masking = masking
        self.status = status
        self.content = content if content is not None else ContentPolicy.ephemeral()
        self.masker = masker if masker is not None else default_masker()
        self.stats = PipelineStats()
        self.quarantine = quarantine or Quarantine(None)
        self.turns = turns if turns is not None else TurnMarker()
        self._stage = "parse"  # where the record being processed is, for the quarantine's reason
        self.guard = guard  # names the record being processed, for the next start if this process dies
        self._encoded: dict[int, bytes] = {}  # id(entry) -> its JSON, for the entries of the batch in hand
        self.workspaces = workspaces if workspaces is not None else WorkspaceRoots()
        # after workspace.root, in order: git attributes, custom attributes (collector.pipeline.attributes)
        self.stampers = tuple(stampers)
        # per-invocation context of a session (collector.pipeline.invocation): before the other stamps
        self.invocations = invocations
        # a turn's upstream span from LoongSuite Pilot's correlation files (collector.pipeline.turn_links)
        self.turn_links = turn_links
        # collector.export_agent_fields off: an agent's own agent.<id>.* fields leave no exporter
        self.drop_agent_fields = drop_agent_fields

    def process(self, records: Iterable[RawRecord]) -> Output:
        """Every record is processed on its own guard: one that fails at any stage goes to the quarantine
        (with the stage and the reason) and the batch goes on without it; one the previous process died
        on goes there unprocessed (``collector.pipeline.crash_guard``)."""
        for stamper in self.stampers:  # e.g. the live attribute file, looked at once a batch
            refresh = getattr(stamper, "refresh", None)
            if refresh is not None:
                refresh()
        try:
            output = self._process(records)
            encoded = self._encoded
            output.lines = [encoded[id(e)] for e in output.entries]  # every entry in it was finished
            return output
        finally:
            self._encoded = {}
            if self.guard is not None:
                self.guard.clear()

    def _process(self, records: Iterable[RawRecord]) -> Output:
        parsed: list[tuple[RawRecord, list[dict[str, Any]], bytes]] = []
        paths: list[tuple[str, str]] = []
        guard = self.guard
        careful = guard is not None and guard.has_condemned()
        agents = self.agents
        stats = self.stats
        named = b""
        for record in records:  # the boundary, then the parser (the record as the boundary let it in)
            stats.records += 1
            settings = agents.get(record.agent)
            if settings is None:
                stats.unknown_agent += 1
                continue
            if guard is not None:
                if careful and guard.condemned(record):
                    self._condemn(record, settings)
                    continue
                named = guard.enter(record)
            try:
                checked = check_record(record)
            except Exception as exc:  # noqa: BLE001 - a bad record must not stop its neighbours
                self._stage = "boundary"
                self._quarantined(record, exc)
                continue
            if settings.field_types is not None and self._mistyped(checked, settings.field_types):
                continue
            try:
                entries = self._entries_of(settings.parser(checked))
            except Exception as exc:  # noqa: BLE001
                self._stage = "parse"
                self._quarantined(record, exc)
                continue
            if TRUNCATED in checked.meta:
                self._truncated(checked, entries)
            if checked.kind == "hook" and settings.path_fields:
                paths.extend(_discovered(checked, settings.path_fields))
            if entries or checked.kind == "hook":  # a hook record that made no entry may still move the status
                parsed.append((checked, entries, named))
        if self.invocations is not None:  # hook records first: a session's context is known to all its entries
            for record, entries, _ in parsed:
                self.invocations.observe(record, entries)
        made = [e for _, es, _ in parsed for e in es]
        review = self.merger.review(made)
        passed = review.dropped | review.corrections  # a correction is delivered again, on purpose
        fresh_ids = {e["event.id"] for e in self.deduper.fresh([e for e in made if id(e) not in passed])}
        out: list[dict[str, Any]] = []
        origins: list[tuple[int, RawRecord]] = []
        for record, entries, named in parsed:
            if guard is not None:
                guard.enter_again(named, record)
            done = self._guarded(record, self._finish_record, record, entries, fresh_ids, review)
            if done is None:
                self.deduper.forget(e["event.id"] for e in entries)
            elif done:
                origins.append((len(out), record))
                out.extend(done)
        return Output(out, paths, origins)

    def finish(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Entries made by the collector itself (the idle rule): deduped and finished like parsed ones."""
        out = []
        for entry in self.deduper.fresh(entries):
            try:
                out.append(self._finish(entry))
            except Exception as exc:  # noqa: BLE001 - one bad entry must not stop the rest
                log.warning("%s entry %s dropped at %s: %r", entry.get("event.name"), entry.get("event.id"),
                            self._stage, exc)
        self._encoded = {}  # few entries: the exporters encode them themselves
        return out

    def attribute_problems(self) -> dict[str, int]:
        """What the stamps refused or could not read, per reason (a stamp's ``problems``, if it has them)."""
        out: dict[str, int] = {}
        for stamper in (*self.stampers, self.invocations, self.turn_links):
            for reason, count in getattr(stamper, "problems", {}).items():
                out[reason] = out.get(reason, 0) + count
        return out

    def retry_quarantined(self) -> Due:
        """What a ``quarantine retry`` asked for: records to go through ``process`` again, entries to
        offer again to the exporter that failed on them."""
        return self.quarantine.due()

    def _guarded(self, record: RawRecord, step: Callable[..., _T], *args: Any) -> _T | None:
        self._stage = "parse"
        try:
            return step(*args)
        except Exception as exc:  # noqa: BLE001 - a bad record must not stop its neighbours
            self._quarantined(record, exc)
            return None

    def _truncated(self, record: RawRecord, entries: list[dict[str, Any]]) -> None:
        reason = str(record.meta[TRUNCATED])
        for entry in entries:
            entry["collector.truncated"] = reason
        seen = self.stats.truncated.get(record.agent, 0)
        self.stats.truncated[record.agent] = seen + 1
        if not seen:
            log.warning("%s: a record %s was read with its deepest values left out (counted in status)",
                        record.agent, reason)

    def _entries_of(self, made: list[AgentActivityEntry]) -> list[dict[str, Any]]:
        """The parser's entries as dicts; its ``unreadable`` markers are counted (the first of each kind
        logged), not passed on."""
        entries = []
        for entry in made:
            if entry.name == UNREADABLE:
                self._count_unreadable(f"{entry.agent}: {entry.attributes.get('reason')}")
            else:
                entries.append(entry.to_dict())
        return entries

    def _mistyped(self, record: RawRecord, types: FieldTypes) -> bool:
        """True (each problem counted) when a field the definition types has another type: the record is
        not parsed (its kind or id would be guessed from a value that is not one)."""
        problems = types.problems(record)
        for problem in problems:
            self._count_unreadable(f"{record.agent}: {problem}")
        return bool(problems)

    def _count_unreadable(self, key: str) -> None:
        seen = self.stats.unreadable.get(key, 0)
        self.stats.unreadable[key] = seen + 1
        if not seen:
            log.warning("%s: a part of a record could not be read and is left out (counted in status)", key)

    def _quarantined(self, record: RawRecord, exc: Exception) -> None:
        self.stats.quarantined += 1
        if self._stage == "parse":
            self.stats.parse_errors += 1
        settings = self.agents.get(record.agent)
        self.quarantine.add(record, self._stage, describe(exc), bool(settings and settings.capture))

    def _condemn(self, record: RawRecord, settings: AgentSettings) -> None:
        self.stats.quarantined += 1
        self.quarantine.add(record, "crash", "the collector died while processing it", settings.capture)

    def _finish_record(self, record: RawRecord, entries: list[dict[str, Any]],
                       fresh_ids: set[str], review: Review) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        emitted = False
        for entry in entries:
            if id(entry) in review.corrections:
                self.stats.corrections += 1
            elif entry["event.id"] not in fresh_ids or id(entry) in review.dropped:
                self.stats.duplicates += 1
                continue
            else:
                fresh_ids.discard(entry["event.id"])  # a second copy within the batch is a duplicate too
            out.append(self._finish(entry))
            emitted = True
            self._observe_status(out, entry, record)
        if not emitted and record.kind == "hook" and self.status is not None:
            self._stage = "status"
            self._emit_status(out, self.status.observe_record(record))
        return out

    def _observe_status(self, out: list[dict[str, Any]], entry: dict[str, Any], record: RawRecord) -> None:
        if self.status is not None:
            self._stage = "status"
            self._emit_status(out, self.status.observe(entry, record if record.kind == "hook" else None))

    def _emit_status(self, out: list[dict[str, Any]], extra: list[dict[str, Any]]) -> None:
        if extra:  # most entries move no status
            out.extend(self._finish(e) for e in self.deduper.fresh(extra))

    def _finish(self, entry: dict[str, Any]) -> dict[str, Any]:
        self._stage = "boundary"
        check_entry(entry)
        agent = entry["gen_ai.agent.type"]
        if "collector.time_replaced" in entry:
            self.stats.times_replaced[agent] = self.stats.times_replaced.get(agent, 0) + 1
        settings = self.agents.get(agent)
        for key, value in self.resource.items():
            entry.setdefault(key, value)
        if settings and settings.provider and _calls_the_model(entry):
            entry.setdefault("gen_ai.provider.name", settings.provider)
        self.workspaces.apply(entry)
        self._stage = "attributes"
        if self.invocations is not None:
            self.invocations.apply(entry)
        for stamper in self.stampers:
            stamper.apply(entry)
        self._stage = "correlate"
        self.correlator.apply(entry)
        self._stage = "turns"
        self.turns.apply(entry)
        if self.turn_links is not None:  # needs the turn and the prompt's text: before the content policy
            self._stage = "upstream"
            self.turn_links.apply(entry)
        self._stage = "policy"
        if self.drop_agent_fields:
            _drop_agent_fields(entry, agent)
        self.content.apply(entry, settings.capture if settings else False)
        if self.masking:
            self._stage = "mask"
            self.masker.mask_entry(entry)
        self._stage = "encode"
        # what every exporter does first: an entry it cannot encode stops here; the JSON lines exporter
        # writes these very bytes (entries are not changed once finished)
        self._encoded[id(entry)] = orjson.dumps(entry)
        self.stats.entries += 1
        name = entry["event.name"]
        self.stats.by_event[name] = self.stats.by_event.get(name, 0) + 1
        if name == "llm.response" and not any(entry.get(k) for k in _MODEL_KEYS):
            self.stats.without_model[agent] = self.stats.without_model.get(agent, 0) + 1
        return entry


def _drop_agent_fields(entry: dict[str, Any], agent: str) -> None:
    """Remove ``agent.<agent>.*`` (what a canonical record or an external plugin names as the agent's own)."""
    own = f"agent.{agent}."
    for key in [k for k in entry if k.startswith(own)]:
        del entry[key]


_MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "agent.model")


def _discovered(record: RawRecord, fields: tuple[str, ...]) -> list[tuple[str, str]]:
    payload = record.data.get("payload")
    if not isinstance(payload, dict):
        return []
    return [(record.agent, payload[f]) for f in fields if isinstance(payload.get(f), str) and payload[f]]


def _calls_the_model(entry: dict[str, Any]) -> bool:
    """A model call, or a model API failure (an error with the API's HTTP status)."""
    name = entry["event.name"]
    return name in ("llm.request", "llm.response") or (name == "error" and "http.response.status_code" in entry)
