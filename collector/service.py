"""The Service owns start-up, the collection loop and shutdown. The CLI only calls it.

One cycle reads every source to its current end in batches; each batch goes through the pipeline to
every exporter, and only then are its positions (with the dedupe ids and exporter marks) committed
(``collector.delivery``). ``collect_once`` runs one cycle. ``serve`` runs the cycles in one worker thread
(the *delivery* thread, with its own private event loop for the sources' async iterators) and keeps the
asyncio loop of the daemon for I/O only: signals, file events (watchfiles), the ingest server, timers.
File events and the poll interval wake the worker; the events name the files a cycle reads (``_narrow``).
A batch an exporter refuses (a full disk) is held,
uncommitted, and offered again about once a second; nothing sleeps on the loop. SIGTERM/SIGINT stop the
worker at the next batch boundary and shut the exporters down within a bounded time; a second signal
exits at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import getpass
import logging
import os
import signal
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from collector import __version__
from collector.agents.registry import load_parser
from collector.change_set import ChangeSet
from collector.config import Config, ConfigError, agent_setting, load_for
from collector.definitions import AgentDefinition
from collector.definitions.verdicts import FILE as VERDICTS_FILE
from collector.definitions.verdicts import Verdicts
from collector.delivery import Delivery
from collector.deploy.choices import disabled_agents
from collector.exporters.base import Exporter, shutdown_all
from collector.exporters.queue import Backlog, QueuedExporter
from collector.exporters.registry import ExporterContext, build_exporters
from collector.external.agents import ExternalAgents, load_external
from collector.handoff import RequestDesk
from collector.model import RawRecord
from collector.parts import DaemonPart
from collector.paths import Paths
from collector.pipeline.content_policy import (
    KEY_FILE,
    ContentKeyError,
    ContentPolicy,
    load_or_create_key,
    policy_for,
)
from collector.pipeline.correlate import Correlator
from collector.pipeline.crash_guard import CrashGuard
from collector.pipeline.field_types import FieldTypes
from collector.pipeline.masking import Masker, MaskingRuleError, load_rules
from collector.pipeline.processor import AgentSettings, Pipeline
from collector.pipeline.quarantine import DueEntry, Quarantine, quarantine_dir
from collector.pipeline.status import SessionStatusTracker
from collector.pipeline.turns import TurnMarker
from collector.plugins import check_definition, load_agents
from collector.sources.base import Narrowable, Position, Scope, Source
from collector.sources.factory import BuildContext, build_sources
from collector.sources.jsonl_files import JsonlFiles
from collector.sources.spool_writer import SpoolWriter
from collector.state import retention
from collector.state.checkpoints import CHECKPOINTS_FILE, CheckpointStore, Commit, KeyState, SessionRow
from collector.state.rebuild import REBUILT_KEY, open_checkpoints
from collector.util import private
from collector.util.atomic import atomic_write
from collector.util.private import open_private, private_dir
from collector.wake_filter import WakeFilter

log = logging.getLogger("collector")
SESSIONS_KEY = "status.sessions"  # where an older version kept the status tracker's open sessions
CORRELATOR_SCOPE = "correlator"  # per-session state in the checkpoint store (collector.pipeline.session_cache)
STATUS_SCOPE = "status"
TURNS_SCOPE = "turns"

T = TypeVar("T")
Progress = Callable[[str, int], None]  # (source name, records so far)
IDLE_LOT = 500  # saved sessions the idle rule loads, closes and commits at a time
HOUSEKEEP_EVERY_S = 60.0  # how often the daemon applies [retention] (spool, outputs, quarantine, logs)
PRUNE_EVERY_S = 3600.0  # how often the daemon forgets dedupe ids older than collector.seen_retention_days
RETRY_HELD_S = 1.0  # how often a batch an exporter refused is offered again
STATUS_EVERY_S = 1.0  # status.json is rewritten at most this often (and only when it changed)
WORKER_JOIN_S = 1.5  # how long a stop waits for the worker to reach a batch boundary
EXPORTERS_SHUTDOWN_S = 2.5  # budget for every exporter's shutdown together (queues drain meanwhile)
END_LIMIT_S = 600.0  # collect --once: stop waiting for delivery after this long in all (see once_stall_s)


class AlreadyRunning(Exception):
    pass


@dataclass(slots=True)
class CycleResult:
    records: int = 0
    entries: int = 0
    batches: int = 0
    by_agent: dict[str, int] = field(default_factory=dict)
    blocked: str | None = None  # why the last batch is held (an exporter refused it), else None


class Service:
    def __init__(self, paths: Paths, config: Config | None = None, output_dir: Path | None = None,
                 clock: Callable[[], int] = time.time_ns, record_faults: bool = False) -> None:
        """``record_faults``: a fatal signal is reported to <state dir>/fault.log (``collector.pipeline.crash_guard``;
        the commands, not in-process tests)."""
        self.paths = paths
        self._record_faults = record_faults
        self._guard: CrashGuard | None = None
        self._clock = clock  # "now" of the idle rule (tests judge captured sessions as long past)
        self._verdicts = Verdicts(paths.state_dir / VERDICTS_FILE)  # schema checks of earlier starts
        self.config = config if config is not None else load_for(paths, check=check_definition,
                                                                 verdicts=self._verdicts)
        self.output_dir = output_dir or Path(self.config.jsonl.dir or paths.output_dir)
        self.definitions: dict[str, AgentDefinition] = {}
        self.sources: list[Source] = []
        self.exporters: list[Exporter] = []
        self.started = time.time()
        self.events_today: dict[str, int] = {}  # entries written today (UTC day of writing), per agent
        self._today = time.strftime("%Y-%m-%d", time.gmtime())
        self.last_event: dict[str, int] = {}
        self._stop = threading.Event()  # set from the loop (signals), read by the worker
        self.fatal: str | None = None  # why the daemon had to stop (the worker failed): `run` exits non-zero
        self._wake = threading.Event()  # file events and the poll timer wake the worker
        self._stopped: Callable[[], None] = lambda: None  # tells the loop the daemon is stopping
        self.state_lock = threading.RLock()  # held by the worker while it changes pipeline state
        self.delivery: Delivery | None = None
        self._pruned_at = 0.0
        self._housekept_at: float | None = None
        self._watch_dirs: list[str] = []  # published by the worker, read by the file-event task
        self._changes = ChangeSet()  # the paths file events named, for the worker
        self._swept_at = -float("inf")  # when a cycle last swept the file sources (monotonic)
        self._idle_timeouts: dict[str, int | None] = {}  # agent -> idle timeout (ns), as first asked
        self._lock_fd: int | None = None
        self._store: CheckpointStore | None = None
        self._rebuilt: dict[str, Any] | None = None
        self._pipeline: Pipeline | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self.spool_writer = SpoolWriter(paths.spool_dir)
        self.status: SessionStatusTracker | None = None  # built at startup from the definitions' status rules
        self.requests = RequestDesk(paths.state_dir)  # collect --once runs handed to the daemon
        self._status_body = b""  # status.json as last written, without its time
        self._status_at = -STATUS_EVERY_S  # when (monotonic)
        self._status_held = False  # a change not written yet (the once-a-second limit)
        self.external = ExternalAgents(self.config.external_agents)  # entire-agent-* plugins, when enabled
        self._external_due = False  # the daemon asks them once its ingest listens (``startup``)
        self.cycles = 0  # the worker's cycles since the start (in status: tests wait on them, not on time)
        self._builtin_names: list[str] = []

    # -- lifecycle --------------------------------------------------------------------------------

    def startup(self, defer_external: bool = False) -> None:
        """Take the lock, open the state, load the agents and build the parts. ``defer_external``: the
        daemon asks the external plugins (``entire-agent-*``, each a process to start and ask) only in
        ``serve``, once its own parts (the ingest) listen: a slow plugin delays no client."""
        self._take_lock()
        try:
            self._start(defer_external)
        except BaseException:
            self._release()  # a start that failed (a bad config, a broken plug-in) holds nothing
            raise

    def _release(self) -> None:
        if self._store:
            self._store.close()
            self._store = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _start(self, defer_external: bool = False) -> None:
        self._repair_modes()
        self._store = open_checkpoints(self.paths.state_dir / CHECKPOINTS_FILE, [self.output_dir])
        self._rebuilt = self._store.get(REBUILT_KEY)  # a corrupt state was moved aside: status says so
        self._prune_seen()
        loaded = load_agents(self.paths.agents_override_dir, self._verdicts)
        self._verdicts.save()  # the state folder exists now: the next start skips the schema checks
        for problem in loaded.problems:
            log.error("agent definition skipped: %s", problem)
        disabled = _disabled_by_user(self.paths)
        self.definitions = {
            k: d for k, d in loaded.agents.items()
            if agent_setting(self.config, k, "enabled", d.enabled) and k not in disabled
        }
        self._builtin_names = list(loaded.agents)
        self._external_due = defer_external and self.config.external_agents.enabled
        if not self._external_due:
            self.external = load_external(self.config.external_agents, self.paths, self._builtin_names)
            self.definitions.update(self.external.definitions())
        self._build_pipeline()
        self._build_sources()
        self._build_exporters()
        self.delivery = Delivery(self.exporters, self._store, poison=self._poisoned, guard=self._guard)
        self._watch_dirs = self._current_watch_dirs()
        log.info("agent-collector %s: %d agents, %d sources, exporters: %s", __version__, len(self.definitions),
                 len(self.sources), ", ".join(e.name for e in self.exporters))

    def state_slot(self, key: str) -> KeyState:
        """A daemon part's own key in the checkpoint store (its bookkeeping), once ``startup`` ran."""
        assert self._store is not None
        return KeyState(self._store, key)

    def end_of_input(self, stall_s: float | None = None, limit_s: float = END_LIMIT_S) -> list[Backlog]:
        """``collect --once`` read everything: every queued exporter delivers what it holds and sends what
        the input shows finished (the trace exporter: turns ended, or idle by their entries' own times),
        all at once; returns what each could not deliver in time (it stays queued for the next run): none
        made progress for ``stall_s`` (default ``collector.once_stall_s``) or ``limit_s`` passed."""
        stall = self.config.collector.once_stall_s if stall_s is None else stall_s
        queues = [e for e in self.exporters if isinstance(e, QueuedExporter)]
        if not queues:
            return []
        with ThreadPoolExecutor(max_workers=len(queues), thread_name_prefix="end-of-input") as pool:
            left = list(pool.map(lambda q: q.end_of_input(stall, limit_s), queues))
        for backlog in left:
            if not backlog.empty:
                log.warning("%s: %d entries still queued and %d items unsent (%s); they go with the next run",
                            backlog.name, backlog.queued, backlog.unsent, backlog.error or "no progress")
        return [b for b in left if not b.empty]

    def shutdown(self) -> None:
        shutdown_all(self.exporters, EXPORTERS_SHUTDOWN_S)
        self.spool_writer.close()
        self._write_status()
        if self._guard is not None:
            self._guard.close()
            self._guard = None
        self._release()

    def _repair_modes(self) -> None:
        """Our files are 0600 and our directories 0700; tighten what an older version or a loose umask
        (e.g. the hook script's spool files) left, and say so."""
        roots = [self.paths.data_dir, self.paths.config_dir]
        roots += [] if self.output_dir.is_relative_to(self.paths.data_dir) else [self.output_dir]
        changed = private.repair(roots)
        if changed:
            log.info("tightened the mode of %d of our files and directories to owner-only (e.g. %s)",
                     len(changed), ", ".join(str(p) for p in changed[:3]))

    def _take_lock(self) -> None:
        private_dir(self.paths.state_dir)
        fd = open_private(self.paths.state_dir / "collector.lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise AlreadyRunning(f"another agent-collector{holder} is using {self.paths.data_dir}: if it is the "
                                 "installed service, `agent-collector service status` shows it and `agent-collector "
                                 "service stop` stops it") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def _build_pipeline(self) -> None:
        assert self._store is not None
        capture_all = self.config.content.capture
        agents = {}
        for agent_id, defn in list(self.definitions.items()):
            settings = self._agent_settings(agent_id, defn, bool(capture_all))
            if settings is None:
                del self.definitions[agent_id]
            else:
                agents[agent_id] = settings
        col = self.config.collector
        resource = {"user.id": col.user_id or _login(), "host.name": col.host_name or socket.gethostname()}
        store = self._store
        cap = col.sessions_in_memory
        correlator = Correlator(store.get("correlator", {}), load=lambda key: store.session(CORRELATOR_SCOPE, key),
                                max_sessions=cap)
        counted = self._store.get("events_today", {})
        if counted.get("day") == self._today:  # today's counts survive a restart
            self.events_today = dict(counted.get("counts", {}))
            self.last_event = dict(counted.get("last", {}))
        try:
            content = policy_for(self.paths.state_dir, self.config.content.digest)
        except ContentKeyError as exc:
            raise ConfigError(str(exc)) from exc
        self.status = SessionStatusTracker({k: d.status_rules for k, d in self.definitions.items()},
                                           max_sessions=cap, digest=content.digest_value,
                                           load=lambda key: store.session(STATUS_SCOPE, key),
                                           due=lambda now: store.sessions_due(STATUS_SCOPE, now),
                                           idle_ns=self._idle_timeout_ns)
        # open sessions wait out their idle timeout; the live view starts with the most recent of them
        self.status.restore([v for _, v in store.recent_sessions(STATUS_SCOPE, cap, open_only=True)])
        self.status.restore(store.get(SESSIONS_KEY, []))  # as an older version saved them
        masker = self._masker(content)
        self._guard = CrashGuard(self.paths.state_dir, faults=self._record_faults)
        self._pipeline = Pipeline(agents, resource, self._store.seen, correlator,
                                  self.config.masking.enabled, self.status, content,
                                  Quarantine(quarantine_dir(self.paths), masker.mask_value),
                                  TurnMarker(store.get("turns"), cap, lambda key: store.session(TURNS_SCOPE, key)),
                                  masker=masker, guard=self._guard)
        if store.get("correlator") or store.get(SESSIONS_KEY) or store.get("turns"):  # an older version's
            store.commit(Commit(sessions=self._session_rows(),  # all-in-one values
                                kv={"correlator": {}, SESSIONS_KEY: [], "turns": {}}))

    def _agent_settings(self, agent_id: str, defn: AgentDefinition, capture_all: bool) -> AgentSettings | None:
        try:
            parser = load_parser(defn.parser)
        except LookupError as exc:
            log.error("%s: %s; agent skipped", agent_id, exc)
            return None
        capture = agent_setting(self.config, agent_id, "content_capture", defn.content_capture or capture_all)
        path_fields = tuple(s["hook_path_field"] for s in defn.sources if s.get("hook_path_field"))
        types = FieldTypes.of_sources(defn.sources)
        return AgentSettings(parser, bool(capture), defn.provider, path_fields, types if types.by_kind else None)

    async def _adopt_external(self) -> None:
        """The deferred discovery of external plugins (``startup(defer_external=True)``): asked in a
        thread, while the ingest already answers; their agents join before the first cycle."""
        self._external_due = False
        try:
            found = await asyncio.to_thread(load_external, self.config.external_agents, self.paths,
                                            self._builtin_names)
        except Exception:  # noqa: BLE001 - a broken discovery costs the plugins, never the daemon
            log.exception("external agents: discovery failed; going on without them")
            return
        assert self._pipeline is not None and self._store is not None and self.status is not None
        new = {k: d for k, d in found.definitions().items() if k not in self.definitions}
        capture_all = bool(self.config.content.capture)
        for agent_id, defn in new.items():
            settings = self._agent_settings(agent_id, defn, capture_all)
            if settings is not None:
                self._pipeline.agents[agent_id] = settings
                self.definitions[agent_id] = defn
        self.status.add_agents({k: self.definitions[k].status_rules for k in new if k in self.definitions})
        self.external = found
        ctx = BuildContext(self.paths, self._store.positions(), self.config.collector.max_line_bytes)
        self.sources += found.sources(self.paths, ctx.positions, ctx.max_line)
        self._watch_dirs = self._current_watch_dirs()
        if new:
            log.info("external agents: %s", ", ".join(sorted(new)))

    def _masker(self, content: ContentPolicy) -> Masker:
        """The shipped rules and the config's, with the modes per field class (hash: keyed like content)."""
        cfg = self.config.masking
        modes = {"content": cfg.content_mode, "attributes": cfg.attributes_mode}
        try:
            key = content.key
            if key is None and "hash" in modes.values():
                key = load_or_create_key(self.paths.state_dir / KEY_FILE)
            return Masker(load_rules(cfg.rules, cfg.disabled_rules), modes, key)
        except (MaskingRuleError, ContentKeyError) as exc:
            raise ConfigError(str(exc)) from exc

    def _build_sources(self) -> None:
        assert self._store is not None
        ctx = BuildContext(self.paths, self._store.positions(), self.config.collector.max_line_bytes)
        self.sources = [s for d in self.definitions.values() for s in build_sources(d, ctx)]
        self.sources += self.external.sources(self.paths, ctx.positions, ctx.max_line)

    def _build_exporters(self) -> None:
        assert self._store is not None
        ctx = ExporterContext(self.config, self.paths, self.output_dir, self._store.get, os.environ,
                              self._store.seen, self._pipeline.quarantine if self._pipeline else None)
        self.exporters = build_exporters(ctx)

    # -- collection -------------------------------------------------------------------------------

    async def collect_once(self, progress: Progress | None = None) -> CycleResult:
        """Read every source to its end; stop early when a batch is held (an exporter refused it)."""
        result = CycleResult()
        if self._retry_held(result) and self._retry_quarantined(result):
            for source in list(self.sources):
                if not await self._drain(source, result, progress):
                    break
            else:
                self._close_idle_sessions(result)
        self._write_status(force=False)
        if result.blocked is None and (self._housekept_at is None
                                       or time.monotonic() - self._housekept_at >= HOUSEKEEP_EVERY_S):
            self.housekeep()
        return result

    def housekeep(self, now: float | None = None) -> None:
        """Apply ``[retention]``: committed spool files go, old outputs, quarantine files and logs too."""
        assert self._store is not None
        self._housekept_at = time.monotonic()
        keep = self.config.retention
        try:
            sweep = retention.sweep_spool(self._store.positions(), self.paths.spool_dir, self.spool_writer,
                                          keep.spool_grace_s, now)
            if sweep.forget:
                self._store.commit(Commit(forget=sweep.forget))
                for source in self.sources:
                    if isinstance(source, JsonlFiles):
                        source.forget(sweep.forget)
            gone = retention.prune_outputs(self.output_dir, keep.output_days, keep.output_max_mb, now)
            gone += retention.prune_idle_files(sorted(quarantine_dir(self.paths).glob("*.jsonl*")),
                                               keep.quarantine_days, now)
            gone += retention.cap_logs(self.paths.data_dir / "log", keep.log_max_mb, keep.log_days, now)
        except (OSError, sqlite3.Error) as exc:
            log.warning("housekeeping failed (next time again): %s", exc)
            return
        if sweep.deleted or sweep.emptied or sweep.swept or gone:
            log.info("retention: %d committed spool files deleted, %d emptied, %d renamed aside; %d old files "
                     "removed", len(sweep.deleted), len(sweep.emptied), len(sweep.swept), len(gone))

    def _prune_seen(self) -> None:
        """Dedupe ids expire after ``collector.seen_retention_days`` (at start-up, then hourly)."""
        assert self._store is not None
        self._pruned_at = time.monotonic()
        try:
            gone = self._store.prune_seen(self.config.collector.seen_retention_days * 86400.0)
            self._store.prune_sessions(self.config.collector.seen_retention_days * 86400.0)
        except sqlite3.Error as exc:  # a full disk: next time
            log.warning("cannot prune the dedupe ids: %s", exc)
            return
        if gone:
            log.info("forgot %d dedupe ids older than %d days", gone, self.config.collector.seen_retention_days)

    def _retry_quarantined(self, result: CycleResult) -> bool:
        """Records a ``quarantine retry`` asked for go through the pipeline again, first; entries an
        exporter failed on go to that exporter again."""
        if self._pipeline is None:
            return True
        due = self._pipeline.retry_quarantined()
        if due.records and not self._flush(due.records, {}, result):
            return False
        return not due.entries or self._redeliver(due.entries, result)

    def _redeliver(self, due: list[DueEntry], result: CycleResult) -> bool:
        assert self.delivery is not None and self._pipeline is not None
        waiting: dict[str, list[dict[str, Any]]] = {}
        for item in due:
            if self.delivery.exporter(item.exporter) is None:
                log.warning("quarantined entry %s: exporter %s is not configured; it stays quarantined",
                            item.entry.get("event.id"), item.exporter)
                self._pipeline.quarantine.keep(item.line)
                continue
            waiting.setdefault(item.exporter, []).append(item.entry)
        entries = [item.entry for item in due]
        pairs = [(exporter, waiting[exporter.name]) for exporter in self.exporters if exporter.name in waiting]
        if self.delivery.deliver_to(pairs, entries, Commit(), [(i, item.origin) for i, item in enumerate(due)]):
            return True
        result.blocked = self._blocked_reason()
        return False

    def _poisoned(self, entry: dict[str, Any], origin: Any, exporter: str, reason: str) -> None:
        """An entry ``exporter`` failed on (``collector.delivery``): quarantined for it."""
        assert self._pipeline is not None
        self._pipeline.quarantine.add_entry(entry, origin, exporter, reason)

    def _retry_held(self, result: CycleResult) -> bool:
        assert self.delivery is not None
        if self.delivery.retry():
            return True
        result.blocked = self._blocked_reason()
        return False

    def _close_idle_sessions(self, result: CycleResult) -> None:
        tracker = self.status
        if tracker is None or self._pipeline is None or self._store is None:
            return
        lots = tracker.expire_lots(self._clock(), self._idle_timeout_ns, lot=IDLE_LOT)
        while True:  # a lot of saved sessions at a time, each committed before the next is loaded
            with self.state_lock:
                expired = next(lots, None)
                if expired is None:
                    return
                entries = self._pipeline.finish(expired)
                entries += self._pipeline.finish(self._pipeline.correlator.close_interrupted(time.time_ns()))
                self._count(entries, result)
            if entries:
                result.entries += len(entries)
                commit = Commit(seen_ids=[e["event.id"] for e in entries], sessions=self._session_rows())
                if not self._deliver(entries, commit, result):
                    return

    def _session_rows(self) -> list[SessionRow]:
        """The per-session state changed since the last commit (correlator and status tracker)."""
        rows = []
        if self._pipeline is not None:
            rows = [SessionRow(CORRELATOR_SCOPE, k, v, last) for k, v, last in self._pipeline.correlator.changes()]
            rows += [SessionRow(TURNS_SCOPE, k, v) for k, v in self._pipeline.turns.changes()]
        if self.status is not None:
            rows += [SessionRow(STATUS_SCOPE, k, v, last, due) for k, v, last, due in self.status.changes()]
        return rows

    def _idle_timeout_ns(self, agent: str) -> int | None:
        """agents.<id>.idle_timeout_s in the config, else the definition's; none: the agent says goodbye.
        Worked out once per agent (the idle rule asks for every session in memory at every cycle)."""
        if agent not in self._idle_timeouts:
            defn = self.definitions.get(agent)
            seconds = agent_setting(self.config, agent, "idle_timeout_s",
                                    defn.raw.get("idle_timeout_s") if defn else None)
            self._idle_timeouts[agent] = int(float(seconds) * 1e9) if seconds else None
        return self._idle_timeouts[agent]

    async def _drain(self, source: Source, result: CycleResult, progress: Progress | None) -> bool:
        """One source, batch by batch. False: stop the cycle (a batch is held, or the daemon stops);
        what was read after the last committed batch is read again later from the committed position."""
        batch_size = self.config.collector.batch_size
        records: list[RawRecord] = []
        positions: dict[str, Position] = {}
        async for record, position in source.read():
            positions[position.stream] = position
            if record is not None:
                records.append(record)
            if len(records) >= batch_size:
                if self._stop.is_set() or not self._flush(records, positions, result):
                    return False
                records, positions = [], {}
                if progress:
                    progress(source.name, result.records)
        if records or positions:
            if self._stop.is_set() or not self._flush(records, positions, result):
                return False
            if progress:
                progress(source.name, result.records)
        return True

    def _flush(self, records: list[RawRecord], positions: dict[str, Position], result: CycleResult) -> bool:
        assert self._pipeline is not None and self._store is not None
        with self.state_lock:
            output = self._pipeline.process(records)
            self._follow(output.discovered_paths)
            commit = Commit(
                positions={p.stream: p.value for p in positions.values()},
                seen_ids=[e["event.id"] for e in output.entries],
                sessions=self._session_rows(),
            )
            self._count(output.entries, result)
            commit.kv["events_today"] = {"day": self._today, "counts": dict(self.events_today),
                                         "last": dict(self.last_event)}
        result.records += len(records)
        result.entries += len(output.entries)
        result.batches += 1
        return self._deliver(output.entries, commit, result, output.origins, output.lines)

    def _deliver(self, entries: list[dict[str, Any]], commit: Commit, result: CycleResult,
                 origins: Sequence[tuple[int, RawRecord]] = (), lines: Sequence[bytes] | None = None) -> bool:
        """Every exporter must accept the batch before its positions move (``collector.delivery``)."""
        assert self.delivery is not None
        if self.delivery.deliver(entries, commit, origins, lines):
            return True
        result.blocked = self._blocked_reason()
        return False

    def _blocked_reason(self) -> str | None:
        held = self.delivery.held if self.delivery is not None else None
        return None if held is None else f"{held.refused_by}: {held.error}"

    def _follow(self, discovered: list[tuple[str, str]]) -> None:
        for agent, path in discovered:
            for source in self.sources:
                if source.agent == agent and isinstance(source, JsonlFiles) and source.kind == "transcript":
                    if source.add_path(path):
                        log.info("%s: following %s (named by a hook)", agent, path)
                    break

    def _count(self, entries: list[dict[str, Any]], result: CycleResult) -> None:
        today = time.strftime("%Y-%m-%d", time.gmtime())
        if today != self._today:
            self._today, self.events_today = today, {}
        for entry in entries:
            agent = entry["gen_ai.agent.type"]
            result.by_agent[agent] = result.by_agent.get(agent, 0) + 1
            self.events_today[agent] = self.events_today.get(agent, 0) + 1
            self.last_event[agent] = max(self.last_event.get(agent, 0), entry["time_unix_nano"])

    # -- the daemon -------------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._stopped()

    def _signalled(self, signum: int) -> None:
        if self._stop.is_set():
            _exit_now(signum)
        log.info("%s: stopping (a second signal exits at once)", signal.Signals(signum).name)
        self.stop()

    async def serve(self, parts: Sequence[DaemonPart] = ()) -> None:
        """The daemon: the worker thread collects; this loop serves I/O (the optional daemon parts,
        started first and stopped last, and file events) until SIGTERM/SIGINT."""
        loop = asyncio.get_running_loop()
        stopped = asyncio.Event()

        def stopped_soon() -> None:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                loop.call_soon_threadsafe(stopped.set)

        self._stopped = stopped_soon
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._signalled, sig)
        worker = threading.Thread(target=self._work, name="delivery", daemon=True)
        self._tasks.append(asyncio.create_task(self._watch_files(), name="file-events"))
        started: list[DaemonPart] = []
        try:
            for part in parts:
                started.append(part)
                await part.start()
            if self._external_due:  # the ingest listens now; the plugins are asked before the first cycle
                await self._adopt_external()
            worker.start()
            await stopped.wait()
        finally:
            self.stop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
                signal.signal(sig, lambda signum, _frame: _exit_now(signum))
            await self._stop_parts(started)
            for task in self._tasks:
                task.cancel()
            await asyncio.wait(self._tasks, timeout=WORKER_JOIN_S)
            if worker.is_alive():
                await asyncio.to_thread(worker.join, WORKER_JOIN_S)
            if worker.is_alive():
                log.error("the delivery worker did not stop within %.1fs; shutting down without it", WORKER_JOIN_S)

    @staticmethod
    async def _stop_parts(started: list[DaemonPart]) -> None:
        for part in reversed(started):
            try:
                await part.stop()
            except Exception as exc:  # noqa: BLE001 - every part must get its stop
                log.warning("%s did not stop cleanly: %r", part.name, exc)

    def _work(self) -> None:
        """The delivery thread: cycles on its own event loop until stopped. File events and the poll
        interval wake it; while a batch is held it offers it again every RETRY_HELD_S."""
        interval = self.config.collector.poll_interval_s
        loop = asyncio.new_event_loop()
        try:
            while not self._stop.is_set():
                self._wake.clear()
                result = loop.run_until_complete(self._cycle())
                self.cycles += 1
                if result.blocked is not None:
                    self._changes.everything()  # the sources it did not reach get every file next time
                if time.monotonic() - self._pruned_at >= PRUNE_EVERY_S:
                    self._prune_seen()
                self._watch_dirs = self._current_watch_dirs()
                if result.blocked is not None:
                    self._stop.wait(RETRY_HELD_S)
                elif self._status_held and not self._wake.wait(min(interval, STATUS_EVERY_S)):
                    self._write_status()  # the change held back by the once-a-second limit
                    self._wake.wait(interval)
                else:
                    self._wake.wait(interval)
        except Exception as exc:  # noqa: BLE001 - not the data's doing (that is quarantined): a fatal error
            self.fatal = f"the delivery worker failed: {type(exc).__name__}: {exc}"
            log.exception("the delivery worker failed; stopping the daemon (exit status 1, so that the service "
                          "manager starts it again)")
        finally:
            loop.close()
            self.stop()

    def _current_watch_dirs(self) -> list[str]:
        return sorted({d for s in self.sources for d in s.watch_paths() if os.path.isdir(d)})

    async def _cycle(self) -> CycleResult:
        """One daemon cycle; it also answers the `collect --once` runs waiting for it (collector.handoff)."""
        tokens = self.requests.take()
        self._narrow(everything=bool(tokens))
        meter = self.requests.meter(tokens, self.sources) if tokens else None
        result = await self.collect_once(meter)
        if tokens:
            self.requests.finish(tokens, result.records, result.entries, result.by_agent)
        return result

    def _narrow(self, everything: bool) -> None:
        """What the file sources read this cycle: every file when asked (``collect --once``), when file
        events are not delivered or may have been missed (``ChangeSet``); else the files events named,
        plus, every ``poll_interval_s``, a sweep: folders whose mtime moved are listed again and a
        ``poll_interval_s / rescan_s`` share of the files is stat-ed, so that each is checked within
        ``rescan_s`` even if its event was lost."""
        changed, full = self._changes.take()
        col = self.config.collector
        now = time.monotonic()
        scope: Scope | None = None
        if everything or full or not self._changes.watching:
            self._swept_at = now
        else:
            due = now - self._swept_at >= 0.9 * col.poll_interval_s  # the wait ends a little early, never late
            self._swept_at = now if due else self._swept_at
            scope = Scope(changed, min(1.0, col.poll_interval_s / col.rescan_s) if due else 0.0)
        for source in self.sources:
            if isinstance(source, Narrowable):
                source.narrow(scope)

    async def _watch_files(self) -> None:
        """File events wake the worker and name the paths that changed (``ChangeSet``). The directories
        come from the worker (``_watch_dirs``, updated after every cycle), so this loop never touches a
        source."""
        import watchfiles

        while not self._stop.is_set():
            dirs = self._watch_dirs
            if not dirs:
                self._changes.watch(False)
                await asyncio.sleep(1)
                continue
            try:
                async for changes in watchfiles.awatch(*dirs, debounce=20, step=10, stop_event=self._stop,
                                                       rust_timeout=1000, yield_on_timeout=True,
                                                       watch_filter=WakeFilter()):
                    if not self._changes.watching:  # the first yield: the watch is set up; a cycle
                        self._changes.watch(True)  # reads every file, for what came before it
                        self._wake.set()
                    if changes:  # a timeout yields nothing: it only lets the directories be checked
                        self._changes.add(path for _, path in changes)
                        self._wake.set()
                    if self._watch_dirs != dirs:
                        break  # new directories appeared: watch them too
            except (OSError, RuntimeError) as exc:
                log.warning("file events unavailable (%s); polling only", exc)
                self._changes.watch(False)
                await asyncio.sleep(5)
            self._changes.watch(False)  # until the new watch is set up

    # -- status -----------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Safe from any thread: the worker's pipeline state is read under ``state_lock``."""
        return self.with_state(self._snapshot)

    def with_state(self, read: Callable[[], T]) -> T:
        """Run ``read`` while the delivery worker leaves the pipeline state (status tracker...) alone."""
        with self.state_lock:
            return read()

    def _snapshot(self) -> dict[str, Any]:
        pipeline = self._pipeline
        return {
            "version": __version__,
            "pid": os.getpid(),
            "started": self.started,
            "updated": time.time(),
            "cycles": self.cycles,
            "data_dir": str(self.paths.data_dir),
            "output_dir": str(self.output_dir),
            "agents": {a: {"events_today": self.events_today.get(a, 0), "last_event_ns": self.last_event.get(a)}
                       for a in self.definitions},
            "sources": {s.name: s.stats.as_dict() for s in self.sources},
            "pipeline": {} if pipeline is None else {
                "records": pipeline.stats.records, "entries": pipeline.stats.entries,
                "duplicates": pipeline.stats.duplicates, "parse_errors": pipeline.stats.parse_errors,
                "by_event": pipeline.stats.by_event, "without_model": pipeline.stats.without_model,
                "times_replaced": pipeline.stats.times_replaced, "unreadable": pipeline.stats.unreadable,
                "truncated": pipeline.stats.truncated},
            "quarantine": {} if pipeline is None else pipeline.quarantine.stats(),
            "state_rebuilt": self._rebuilt,
            "exporters": {e.name: e.stats() for e in self.exporters},
            "delivery": {} if self.delivery is None else self.delivery.status(),
            "external_agents": self.external.status(),
        }

    def _write_status(self, force: bool = True) -> None:
        """``status.json``, when it changed (its ``updated`` time aside), at most every STATUS_EVERY_S
        unless forced; a change held back is written by the worker within that time."""
        snapshot = self.snapshot()
        updated = snapshot.pop("updated")
        body = orjson.dumps(snapshot)
        if body == self._status_body:
            self._status_held = False
            return
        if not force and time.monotonic() - self._status_at < STATUS_EVERY_S:
            self._status_held = True
            return
        snapshot["updated"] = updated
        try:
            atomic_write(self.paths.state_dir / "status.json", orjson.dumps(snapshot))
        except OSError as exc:
            log.warning("cannot write status: %s", exc)
            return
        self._status_body, self._status_at, self._status_held = body, time.monotonic(), False


def _disabled_by_user(paths: Paths) -> set[str]:
    """`agent-collector agents disable ID` means: no integration, and no collection either."""
    return set(disabled_agents(paths))


def _exit_now(signum: int) -> None:
    """The second SIGTERM/SIGINT: no more waiting for anything (positions not committed are re-read)."""
    os.write(2, b"agent-collector: second signal, exiting now\n")
    os._exit(128 + signum)


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _lock_holder(fd: int) -> str:
    """`` (pid N)`` from the lock file the running collector wrote, or nothing if it cannot be read."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {int(text)})" if text.isdigit() else ""
