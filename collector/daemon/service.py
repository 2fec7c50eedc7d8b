"""The Service owns start-up, the collection loop and shutdown. The CLI only calls it.

One cycle reads every source to its current end in batches; each batch goes through the pipeline to
every exporter, and only then are its positions (with the dedupe ids and exporter marks) committed
(``collector.daemon.delivery``). ``collect_once`` runs one cycle. ``serve`` runs the cycles in one worker thread
(the *delivery* thread, with its own private event loop for the sources' async iterators) and keeps the
asyncio loop of the daemon for I/O only: signals, file events (watchfiles), the ingest server, timers.
File events and the poll interval wake the worker; the events name the files a cycle reads
(``collector.daemon.file_events``). A batch an exporter refuses (a full disk) is held,
uncommitted, and offered again about once a second; nothing sleeps on the loop. SIGTERM/SIGINT stop the
worker at the next batch boundary and shut the exporters down within a bounded time; a second signal
exits at once.

The Service coordinates; the state it coordinates belongs to its parts, each in its own module: the lock
(``instance_lock``), the pipeline's making (``pipeline_assembly``) and its per-session state
(``session_state``), the idle rule (``idle_rule``), the transcripts hooks name (``followed_paths``), the
counts per agent (``event_counts``), the file events (``file_events``), the clean-ups
(``housekeeping``) and ``status.json`` (``status_file``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from collector import __version__
from collector.config import Config, agent_setting, load_for
from collector.daemon.budget_watch import BudgetWatch
from collector.daemon.collection import Collection, CycleResult, Progress
from collector.daemon.delivery import Delivery
from collector.daemon.event_counts import KEY as COUNTS_KEY
from collector.daemon.event_counts import EventCounts
from collector.daemon.file_events import FileEvents
from collector.daemon.followed_paths import FollowedPaths
from collector.daemon.handoff import RequestDesk
from collector.daemon.housekeeping import Housekeeping
from collector.daemon.idle_rule import IdleRule
from collector.daemon.instance_lock import AlreadyRunning, InstanceLock
from collector.daemon.parts import DaemonPart
from collector.daemon.pipeline_assembly import PipelineAssembly
from collector.daemon.plugins import check_definition, load_agents
from collector.daemon.session_state import SessionState
from collector.daemon.status_file import STATUS_EVERY_S, StatusFile, pipeline_status
from collector.definitions import AgentDefinition
from collector.definitions.verdicts import FILE as VERDICTS_FILE
from collector.definitions.verdicts import Verdicts
from collector.deploy.choices import disabled_agents
from collector.exporters.base import Exporter, shutdown_all
from collector.exporters.queue import Backlog, QueuedExporter
from collector.exporters.registry import ExporterContext, build_exporters
from collector.external.agents import ExternalAgents, load_external
from collector.paths import Paths
from collector.pipeline.crash_guard import CrashGuard
from collector.pipeline.processor import Pipeline
from collector.pipeline.status import SessionStatusTracker
from collector.sources.base import Source
from collector.sources.factory import BuildContext, build_sources
from collector.sources.spool_writer import SpoolWriter
from collector.state.checkpoints import CHECKPOINTS_FILE, CheckpointStore, KeyState
from collector.state.rebuild import REBUILT_KEY, open_checkpoints
from collector.util import private

__all__ = ["AlreadyRunning", "CycleResult", "Progress", "Service"]

log = logging.getLogger("collector")

T = TypeVar("T")
RETRY_HELD_S = 1.0  # how often a batch an exporter refused is offered again
WORKER_JOIN_S = 1.5  # how long a stop waits for the worker to reach a batch boundary
END_LIMIT_S = 600.0  # collect --once: stop waiting for delivery after this long in all (see once_stall_s)


class Service:
    def __init__(self, paths: Paths, config: Config | None = None, output_dir: Path | None = None,
                 clock: Callable[[], int] = time.time_ns, record_faults: bool = False) -> None:
        """``clock``: the idle rule's "now" (tests judge captured sessions as long past). ``record_faults``: a
        fatal signal is reported to <state dir>/fault.log (``collector.pipeline.crash_guard``; the commands,
        not in-process tests)."""
        self.paths = paths
        self._record_faults = record_faults
        self._verdicts = Verdicts(paths.state_dir / VERDICTS_FILE)  # schema checks of earlier starts
        self.config = config if config is not None else load_for(paths, check=check_definition,
                                                                 verdicts=self._verdicts)
        self.output_dir = output_dir or Path(self.config.jsonl.dir or paths.output_dir)
        self.definitions: dict[str, AgentDefinition] = {}  # filled by startup; the parts share this dict
        self.sources: list[Source] = []
        self.exporters: list[Exporter] = []
        self.started = time.time()
        self.counts = EventCounts()  # entries written today (UTC day of writing), per agent
        self._stop = threading.Event()  # set from the loop (signals), read by the worker
        self.fatal: str | None = None  # why the daemon had to stop (the worker failed): `run` exits non-zero
        self._wake = threading.Event()  # file events and the poll timer wake the worker
        self._stopped: Callable[[], None] = lambda: None  # tells the loop the daemon is stopping
        self.state_lock = threading.RLock()  # held by the worker while it changes pipeline state
        self.delivery: Delivery | None = None
        self._collection: Collection | None = None  # the way of a batch, once the parts are built (startup)
        self._files = FileEvents(self.config)
        self._idle = IdleRule(self.config, self.definitions, clock)
        self.budget = BudgetWatch(self.config, paths, self.definitions)  # [budget] and spend.json
        self._followed = FollowedPaths()
        self._lock = InstanceLock(paths)
        self._store: CheckpointStore | None = None
        self._housekeeping: Housekeeping | None = None  # these three once the store is open (startup)
        self._sessions: SessionState | None = None
        self._assembly: PipelineAssembly | None = None
        self._rebuilt: dict[str, Any] | None = None
        self._pipeline: Pipeline | None = None
        self._guard: CrashGuard | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self.spool_writer = SpoolWriter(paths.spool_dir)
        self.status: SessionStatusTracker | None = None  # built at startup from the definitions' status rules
        self.requests = RequestDesk(paths.state_dir)  # collect --once runs handed to the daemon
        self._status_file = StatusFile(paths.state_dir / "status.json")
        self.external = ExternalAgents(self.config.external_agents)  # entire-agent-* plugins, when enabled
        self._external_due = False  # the daemon asks them once its ingest listens (``startup``)
        self.cycles = 0  # the worker's cycles since the start (in status: tests wait on them, not on time)
        self.caught_up = False  # the last cycle read nothing new and no full pass is due (``status``)
        self._builtin_names: list[str] = []

    # -- lifecycle --------------------------------------------------------------------------------

    def startup(self, defer_external: bool = False) -> None:
        """Take the lock, open the state, load the agents and build the parts. ``defer_external``: the
        daemon asks the external plugins (``entire-agent-*``, each a process to start and ask) only in
        ``serve``, once its own parts (the ingest) listen: a slow plugin delays no client."""
        self._lock.take()
        try:
            self._start(defer_external)
        except BaseException:
            self._release()  # a start that failed (a bad config, a broken plug-in) holds nothing
            raise

    def _release(self) -> None:
        if self._store:
            self._store.close()
            self._store = None
        self._lock.release()

    def _start(self, defer_external: bool = False) -> None:
        self._repair_modes()
        store = self._store = open_checkpoints(self.paths.state_dir / CHECKPOINTS_FILE, [self.output_dir])
        self._rebuilt = store.get(REBUILT_KEY)  # a corrupt state was moved aside: status says so
        self._housekeeping = Housekeeping(self.config, self.paths, self.output_dir, store, self.spool_writer)
        self._housekeeping.prune_seen()
        self._load_definitions(defer_external)
        self._build_pipeline()
        self._build_sources()
        self._build_exporters()
        assert self._pipeline is not None and self._sessions is not None
        self.delivery = Delivery(self.exporters, store, poison=self._pipeline.quarantine.add_entry, guard=self._guard)
        self._collection = Collection(self.config, self._pipeline, self.delivery, self._sessions, self.counts,
                                      self._followed, self._idle, self.state_lock, self._stop)
        self._files.publish(self.sources)
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
        shutdown_all(self.exporters, self.config.collector.stop_timeout_s)  # queues drain meanwhile
        self.spool_writer.close()
        self.budget.close()
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

    def _load_definitions(self, defer_external: bool) -> None:
        """The agents to collect: the shipped and override definitions the config enables and the user did
        not disable (`agent-collector agents disable ID`: no integration, no collection), and unless
        deferred the external plugins' agents."""
        loaded = load_agents(self.paths.agents_override_dir, self._verdicts)
        self._verdicts.save()  # the state folder exists now: the next start skips the schema checks
        for problem in loaded.problems:
            log.error("agent definition skipped: %s", problem)
        for notice in loaded.notices:
            log.warning("%s", notice)
        disabled = set(disabled_agents(self.paths))
        self.definitions.update({k: d for k, d in loaded.agents.items()
                                 if agent_setting(self.config, k, "enabled", d.enabled) and k not in disabled})
        self._builtin_names = list(loaded.agents)
        self._external_due = defer_external and self.config.external_agents.enabled
        if not self._external_due:
            self.external = load_external(self.config.external_agents, self.paths, self._builtin_names)
            self.definitions.update(self.external.definitions())

    def _build_pipeline(self) -> None:
        assert self._store is not None
        self.counts.restore(self._store.get(COUNTS_KEY, {}))  # today's counts survive a restart
        self._sessions = SessionState(self._store)
        self._assembly = PipelineAssembly(self.config, self.paths, self._sessions, self._record_faults)
        built = self._assembly.build(self.definitions, self._idle.timeout_ns)
        self._pipeline, self.status, self._guard = built.pipeline, built.status, built.guard
        self._sessions.migrate()

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
        assert self._assembly is not None
        new = {k: d for k, d in found.definitions().items() if k not in self.definitions}
        for agent_id, defn in new.items():
            settings = self._assembly.agent_settings(agent_id, defn)
            if settings is not None:
                self._pipeline.agents[agent_id] = settings
                self.definitions[agent_id] = defn
        self.status.add_agents({k: self.definitions[k].status_rules for k in new if k in self.definitions})
        self.external = found
        ctx = BuildContext(self.paths, self._store.positions(), self.config.collector.max_line_bytes)
        self.sources += found.sources(self.paths, ctx.positions, ctx.max_line)
        self._followed.refresh(self.sources)
        self._files.publish(self.sources)
        if new:
            log.info("external agents: %s", ", ".join(sorted(new)))

    def _build_sources(self) -> None:
        assert self._store is not None
        ctx = BuildContext(self.paths, self._store.positions(), self.config.collector.max_line_bytes)
        self.sources = [s for d in self.definitions.values() for s in build_sources(d, ctx)]
        self.sources += self.external.sources(self.paths, ctx.positions, ctx.max_line)
        self._followed.refresh(self.sources)

    def _build_exporters(self) -> None:
        assert self._store is not None
        ctx = ExporterContext(self.config, self.paths, self.output_dir, self._store.get, os.environ,
                              self._store.seen, self._pipeline.quarantine if self._pipeline else None)
        self.exporters = build_exporters(ctx)

    # -- collection -------------------------------------------------------------------------------

    async def collect_once(self, progress: Progress | None = None) -> CycleResult:
        """Read every source to its end; stop early when a batch is held (an exporter refused it). First
        what waits: the held batch, then what a ``quarantine retry`` asked for; last the idle rule."""
        assert self._collection is not None and self._housekeeping is not None
        flow, result = self._collection, CycleResult()
        if flow.retry_held(result) and flow.retry_quarantined(result):
            for source in list(self.sources):
                if not await flow.drain(source, result, progress):
                    break
            else:
                flow.close_idle_sessions(result)
                if self.budget.due(result.entries):
                    self.budget.check(flow.deliver_made, result)
        self._write_status(force=False)
        if result.blocked is None and self._housekeeping.housekeeping_due():
            self.housekeep()
        return result

    def housekeep(self, now: float | None = None) -> None:
        """Apply ``[retention]`` (``collector.daemon.housekeeping``)."""
        assert self._housekeeping is not None
        self._housekeeping.housekeep(self.sources, now)

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
        self._tasks.append(asyncio.create_task(self._files.watch(self._stop, self._wake), name="file-events"))
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
        assert self._housekeeping is not None
        interval = self.config.collector.poll_interval_s
        loop = asyncio.new_event_loop()
        try:
            while not self._stop.is_set():
                self._wake.clear()
                result = loop.run_until_complete(self._cycle())
                self.cycles += 1
                self._note_caught_up(result)
                if result.blocked is not None:
                    self._files.changes.everything()  # the sources it did not reach get every file next time
                if self._housekeeping.prune_due():
                    self._housekeeping.prune_seen()
                self._files.publish(self.sources)
                if result.blocked is not None:
                    self._stop.wait(RETRY_HELD_S)
                elif self._status_file.held and not self._wake.wait(min(interval, STATUS_EVERY_S)):
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

    def _note_caught_up(self, result: CycleResult) -> None:
        """``caught_up``: the backlog is empty (the cycle read no record, held nothing, and file events
        name what comes next); status.json says so within a second of a change."""
        caught_up = result.blocked is None and result.records == 0 and self._files.changes.settled
        if caught_up != self.caught_up:
            self.caught_up = caught_up
            self._write_status(force=False)

    async def _cycle(self) -> CycleResult:
        """One daemon cycle; it also answers the `collect --once` runs waiting for it (collector.daemon.handoff)."""
        tokens = self.requests.take()
        self._files.narrow(self.sources, everything=bool(tokens))
        meter = self.requests.meter(tokens, self.sources) if tokens else None
        result = await self.collect_once(meter)
        if tokens:
            self.requests.finish(tokens, result.records, result.entries, result.by_agent)
        return result

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
            "caught_up": self.caught_up,
            "data_dir": str(self.paths.data_dir),
            "output_dir": str(self.output_dir),
            "agents": {a: self.counts.of(a) for a in self.definitions},
            "sources": {s.name: s.stats.as_dict() for s in self.sources},
            "pipeline": pipeline_status(pipeline),
            "quarantine": {} if pipeline is None else pipeline.quarantine.stats(),
            "state_rebuilt": self._rebuilt,
            "exporters": {e.name: e.stats() for e in self.exporters},
            "delivery": {} if self.delivery is None else self.delivery.status(),
            "external_agents": self.external.status(),
            "budget": self.budget.status(),
        }

    def _write_status(self, force: bool = True) -> None:
        """``status.json`` (``collector.daemon.status_file``): unless forced, at most once a second."""
        self._status_file.write(self.snapshot(), force)


def _exit_now(signum: int) -> None:
    """The second SIGTERM/SIGINT: no more waiting for anything (positions not committed are re-read)."""
    os.write(2, b"agent-collector: second signal, exiting now\n")
    os._exit(128 + signum)
