"""The watchdog: puts our hooks back when another program rewrites an agent's config without them.

It watches (watchfiles) the folders of every file we deployed into, per the deploy records. When such a
file changes and our entries are gone or altered (``foreign_modified`` / ``outdated``), it re-applies the
integrations that write into that file, within a second or so. Two tools fighting over one file cannot
loop: after a repair the file is left alone for ``cooldown_s``, and after ``daily_cap`` repairs in a day it
is left alone until the next day and reported as a conflict. An agent the user disabled
(``agents disable``) is never touched. Every repair is logged; counters go to ``stats()`` and, as they
change, into the checkpoint store under the ``watchdog`` key (a :class:`KeyState` the daemon hands in),
which ``agent-collector status`` prints. A ``watchdog.json`` left by an older version is moved there at
start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from collector.config import WatchdogSection
from collector.definitions.loader import AgentDefinition
from collector.deploy.choices import disabled_agents
from collector.deploy.engine import integration_state, repair_file
from collector.deploy.fsutil import real_target
from collector.deploy.model import Action, State
from collector.deploy.records import RecordStore
from collector.paths import Paths
from collector.state.checkpoints import KeyState

log = logging.getLogger(__name__)

REPAIRABLE = {State.FOREIGN_MODIFIED, State.OUTDATED}


@dataclass(slots=True)
class FileWatch:
    agent: str
    day: str = ""
    repairs_today: int = 0
    repairs_total: int = 0
    last_repair_unix: float = 0.0
    last_change_unix: float = 0.0
    conflict: bool = False
    capped: bool = False
    note: str = ""


STATE_KEY = "watchdog"  # its slot in the checkpoint store


def legacy_file(paths: Paths) -> Path:
    """Where versions before the checkpoint store owned it kept the watchdog's counts."""
    return paths.state_dir / "watchdog.json"


class Watchdog:
    def __init__(
        self,
        definitions: Mapping[str, AgentDefinition],
        paths: Paths,
        state: KeyState,
        clock: Callable[[], float] = time.time,
        hook_script: Path | None = None,
        cooldown_s: float = 5.0,
        daily_cap: int = 10,
        conflict_window_s: float = 600.0,
        rescan_s: float = 30.0,
    ) -> None:
        self.definitions = dict(definitions)
        self.paths = paths
        self.state = state
        self.clock = clock
        self.hook_script = hook_script
        self.cooldown_s = cooldown_s
        self.daily_cap = daily_cap
        self.conflict_window_s = conflict_window_s
        self.rescan_s = rescan_s
        self.files: dict[Path, FileWatch] = {}
        self.errors = 0
        self.last_repair: dict[str, Any] | None = None
        self._due: dict[Path, float] = {}
        self._stop = asyncio.Event()
        self.rounds = 0  # file-event rounds looked at (a change, or 250 ms without one): tests wait on it
        self._store = RecordStore(paths)
        self._restore_counts()

    # -- lifecycle ----------------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        import watchfiles

        self._stop.clear()
        try:
            self.check_all()
            self._write_status()  # `status` shows the watchdog (and what it watches) from the start
            recheck = False
            while not self._stop.is_set():
                dirs = self._watch_dirs()
                if not dirs:
                    await self._idle(self.rescan_s)
                    self.check_all()
                    continue
                try:
                    recheck = await self._watch(watchfiles, dirs, recheck)
                except (OSError, RuntimeError) as exc:
                    log.warning("watchdog: file events unavailable (%s); checking every %.0fs", exc,
                                self.rescan_s)
                    await self._idle(self.rescan_s)
                    self.check_all()
        finally:
            self._write_status()

    async def _watch(self, watchfiles: Any, dirs: list[str], recheck: bool = False) -> bool:
        """Watch ``dirs`` until their set changes; True when a watched folder itself went away.
        ``recheck``: look at every file once the watches are up, for changes made while there were none."""
        next_rescan = time.monotonic() + self.rescan_s
        async for changes in watchfiles.awatch(
            *dirs, watch_filter=None, debounce=200, step=50, stop_event=self._stop, rust_timeout=250,
            yield_on_timeout=True, recursive=False,
        ):
            self.rounds += 1
            if recheck:  # the first yield comes after the watches were set up
                recheck = False
                self.check_all()
            targets = self._targets()
            for _, raw in changes:
                file = targets.get(Path(raw).resolve())
                if file is not None:
                    watch = self.files.setdefault(file, FileWatch(self._agent_of(file)))
                    watch.last_change_unix = self.clock()
                    self.check(file)
            if any(raw in dirs for _, raw in changes):
                return True  # a watched folder itself went (and the repair made it anew): watch the new one
            for file, due in list(self._due.items()):
                if self.clock() >= due:
                    del self._due[file]
                    self.check(file)
            if time.monotonic() >= next_rescan:
                self.check_all()
                next_rescan = time.monotonic() + self.rescan_s
                if self._watch_dirs() != dirs:
                    return False  # files were installed or removed: watch the new set of folders
        return False

    async def _idle(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)

    # -- what we watch ------------------------------------------------------------------------------

    def _watched(self) -> list[tuple[str, Path]]:
        disabled = disabled_agents(self.paths)
        return [(r.agent, r.path) for r in self._store.all()
                if r.agent in self.definitions and r.agent not in disabled]

    def _targets(self) -> dict[Path, Path]:
        return {real_target(file).resolve(): file for _, file in self._watched()}

    def _watch_dirs(self) -> list[str]:
        dirs = set()
        for _, file in self._watched():
            folder = real_target(file).parent
            while not folder.exists() and folder != folder.parent:
                folder = folder.parent
            dirs.add(str(folder))
        return sorted(dirs)

    def _agent_of(self, file: Path) -> str:
        for agent, path in self._watched():
            if path == file:
                return agent
        return "?"

    # -- checks and repairs -------------------------------------------------------------------------

    def check_all(self) -> None:
        for _, file in self._watched():
            self.check(file)

    def check(self, file: Path) -> list[str]:
        """Look at one deployed file; repair it when the policy allows. Returns what was done."""
        done: list[str] = []
        for agent, path in self._watched():
            if path != file:
                continue
            try:
                done += self._check_agent_file(self.definitions[agent], file)
            except Exception as exc:  # noqa: BLE001 - the watchdog must outlive any one bad file
                self.errors += 1
                log.exception("watchdog: checking %s for %s failed: %s", file, agent, exc)
        return done

    def _check_agent_file(self, defn: AgentDefinition, file: Path) -> list[str]:
        states = [s for s in integration_state(defn, self.paths, self.hook_script) if str(file) in s.covers]
        broken = [s for s in states if s.state in REPAIRABLE]
        watch = self.files.setdefault(file, FileWatch(defn.id))
        if not broken:
            return []
        now = self.clock()
        day = time.strftime("%Y-%m-%d", time.localtime(now))
        if watch.day != day:
            watch.day, watch.repairs_today, watch.capped = day, 0, False
        if watch.repairs_today >= self.daily_cap:
            if not watch.capped:
                watch.capped = watch.conflict = True
                watch.note = (f"another program keeps removing our entries; gave up after {self.daily_cap} "
                              f"repairs today (daily cap); `agent-collector install --agent {defn.id}` "
                              f"re-applies, `agents disable {defn.id}` stops trying")
                log.error("watchdog: %s: %s", file, watch.note)
                self._write_status()
            return []
        if watch.last_repair_unix and now - watch.last_repair_unix < self.cooldown_s:
            self._due[file] = watch.last_repair_unix + self.cooldown_s
            return []
        changes = repair_file(defn, self.paths, file, self.hook_script)
        failed = [c for c in changes if c.action is Action.ERROR]
        if failed or not changes:
            watch.note = "; ".join(c.summary for c in failed) or "nothing to re-apply"
            self.errors += 1
            self._write_status()
            return []
        if watch.last_repair_unix and now - watch.last_repair_unix < self.conflict_window_s:
            watch.conflict = True
            since = now - watch.last_repair_unix
            watch.note = (f"rewritten without our entries again {since:.0f}s after our last repair: "
                          f"another program is fighting over this file")
        elif not watch.conflict:
            watch.note = ""
        watch.repairs_today += 1
        watch.repairs_total += 1
        watch.last_repair_unix = now
        self.last_repair = {"file": str(file), "agent": defn.id, "at_unix": now,
                            "reason": "; ".join(f"{s.kind}: {s.state.value}" for s in broken)}
        log.warning("watchdog: %s: our %s entries were removed or changed by another program; put back "
                    "(%d/%d today)", file, defn.id, watch.repairs_today, self.daily_cap)
        self._write_status()
        return [str(c) for c in changes]

    # -- status -------------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return {
            "cooldown_s": self.cooldown_s,
            "daily_cap": self.daily_cap,
            "watched_files": len(self._watched()),
            "repairs_total": sum(w.repairs_total for w in self.files.values()),
            "repairs_today": sum(w.repairs_today for w in self.files.values()),
            "conflicts": sorted(str(f) for f, w in self.files.items() if w.conflict),
            "errors": self.errors,
            "last_repair": self.last_repair,
            "files": {str(f): asdict(w) for f, w in sorted(self.files.items())},
            "updated_unix": self.clock(),
        }

    def _write_status(self) -> None:
        try:
            self.state.save(self.stats())
        except sqlite3.Error as exc:
            log.warning("watchdog: cannot save its counts: %s", exc)

    def _restore_counts(self) -> None:
        """Today's counts survive a daemon restart, so a restart loop cannot lift the daily cap."""
        self.state.adopt(legacy_file(self.paths))
        saved = self.state.load()
        if saved is None:
            return
        try:
            files = saved.get("files", {})
            today = time.strftime("%Y-%m-%d", time.localtime(self.clock()))
            for name, data in files.items():
                watch = FileWatch(**data)
                if watch.day != today:
                    watch.repairs_today, watch.capped, watch.conflict, watch.note = 0, False, False, ""
                self.files[Path(name)] = watch
        except (ValueError, TypeError, AttributeError):
            return


class WatchdogPart:
    """The watchdog as a daemon part (:class:`collector.daemon.parts.DaemonPart`): runs on the daemon's event
    loop from ``start`` until ``stop``."""

    name = "watchdog"

    def __init__(self, definitions: Mapping[str, AgentDefinition], paths: Paths, section: WatchdogSection,
                 state: KeyState) -> None:
        self.watchdog = Watchdog(definitions, paths, state, cooldown_s=section.cooldown_s,
                                 daily_cap=section.daily_cap)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self.watchdog.run(), name="watchdog")

    async def stop(self) -> None:
        self.watchdog.stop()
        task, self._task = self._task, None
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(task, 5.0)
