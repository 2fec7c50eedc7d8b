"""Auto-deploy: agents installed after agent-collector get their integration without a second `install`.

The daemon part re-runs detection (:func:`collector.definitions.detect.detect`) when something changes
where an agent would appear (file events on the nearest existing folder of every ``detect.paths`` entry
and on those folders themselves, not recursive) and at least every ``rescan_s`` seconds (commands appear
on PATH without a file event we watch). An agent is deployed when it is detected, enabled in its
definition, not disabled by the user (``agents disable``), has no deploy record (nothing of ours is
deployed for it) and was not deployed or seen deployed before: an agent the user took out with
``uninstall`` while it stayed installed is left alone. The agents seen installed and every deploy are kept in
the checkpoint store under the ``autodeploy`` key (a :class:`KeyState` the daemon hands in; an
``autodeploy.json`` of an older version is moved there at start-up), which ``agent-collector status``
prints; each deploy is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collector.definitions.detect import detect
from collector.definitions.loader import AgentDefinition
from collector.deploy.choices import disabled_agents
from collector.deploy.engine import install_agent
from collector.deploy.model import Action
from collector.deploy.records import RecordStore
from collector.paths import Paths
from collector.state.checkpoints import KeyState

log = logging.getLogger(__name__)
MAX_HISTORY = 50


STATE_KEY = "autodeploy"  # its slot in the checkpoint store


def legacy_file(paths: Paths) -> Path:
    """Where versions before the checkpoint store owned it kept auto-deploy's state."""
    return paths.state_dir / "autodeploy.json"


@dataclass(slots=True)
class AutoDeployState:
    known: dict[str, float] = field(default_factory=dict)  # agent -> first seen installed (unix)
    deployed: list[dict[str, Any]] = field(default_factory=list)  # newest last
    scans: int = 0
    errors: int = 0
    last_scan_unix: float = 0.0


class AutoDeployer:
    def __init__(self, definitions: Mapping[str, AgentDefinition], paths: Paths, state: KeyState,
                 rescan_s: float = 120.0, clock: Callable[[], float] = time.time,
                 hook_script: Path | None = None) -> None:
        self.definitions = dict(definitions)
        self.paths = paths
        self.slot = state
        self.rescan_s = rescan_s
        self.clock = clock
        self.hook_script = hook_script
        state.adopt(legacy_file(paths))
        self.state = _load(state)
        self._told: set[str] = set()  # detected but disabled: logged once
        self._stop = asyncio.Event()
        self.rounds = 0  # file-event rounds looked at (the first: the watches are up): tests wait on it

    # -- one scan -----------------------------------------------------------------------------------

    def scan(self) -> list[str]:
        """Detect every agent once; deploy the newly installed ones. Returns the agents deployed."""
        disabled = disabled_agents(self.paths)
        recorded = {r.agent for r in RecordStore(self.paths).all()}
        done: list[str] = []
        for defn in self.definitions.values():
            try:
                if self._scan_one(defn, disabled, recorded):
                    done.append(defn.id)
            except Exception as exc:  # noqa: BLE001 - one agent's failure must not stop the others
                self.state.errors += 1
                log.exception("auto-deploy: %s: %s", defn.id, exc)
        self.state.scans += 1
        self.state.last_scan_unix = self.clock()
        self._write_status()
        return done

    def _scan_one(self, defn: AgentDefinition, disabled: set[str], recorded: set[str]) -> bool:
        if defn.id in self.state.known or not detect(defn, self.paths).installed:
            return False
        if defn.id in recorded:  # deployed by `install` (or by us before): nothing to do, ever
            self.state.known[defn.id] = self.clock()
            return False
        if not defn.enabled or defn.id in disabled:
            if defn.id not in self._told:
                self._told.add(defn.id)
                log.info("auto-deploy: %s detected; not deployed: %s", defn.id, _why_not(defn))
            return False
        self.state.known[defn.id] = self.clock()
        changes = install_agent(defn, self.paths, self.hook_script)
        failed = [c for c in changes if c.action is Action.ERROR]
        entry = {"agent": defn.id, "at_unix": self.clock(), "ok": not failed,
                 "changes": [str(c) for c in changes]}
        self.state.deployed = [*self.state.deployed, entry][-MAX_HISTORY:]
        if failed:
            self.state.errors += 1
            log.error("auto-deploy: %s newly detected; deploying failed: %s", defn.id,
                      "; ".join(str(c) for c in failed))
        else:
            log.warning("auto-deploy: %s newly detected; integration deployed: %s", defn.id,
                        "; ".join(str(c) for c in changes))
        return not failed

    # -- the loop -----------------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        import watchfiles

        self._stop.clear()
        self.scan()
        while not self._stop.is_set():
            dirs = self.watch_dirs()
            try:
                await self._watch(watchfiles, dirs) if dirs else await self._idle(self.rescan_s)
            except (OSError, RuntimeError) as exc:
                log.warning("auto-deploy: file events unavailable (%s); detecting every %.0fs", exc,
                            self.rescan_s)
                await self._idle(self.rescan_s)
            if not self._stop.is_set():
                self.scan()

    async def _watch(self, watchfiles: Any, dirs: list[str]) -> None:
        """Scan on each change under ``dirs``; return at the rescan interval or when the set changes."""
        deadline = time.monotonic() + self.rescan_s
        first = True  # the first yield comes once the watches are up: look for what came before them
        async for changes in watchfiles.awatch(*dirs, watch_filter=None, debounce=300, step=50,
                                               stop_event=self._stop, rust_timeout=250,
                                               yield_on_timeout=True, recursive=False):
            self.rounds += 1
            if changes or first:
                first = False
                self.scan()
                if self.watch_dirs() != dirs:
                    return
            if time.monotonic() >= deadline:
                return

    async def _idle(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)

    def watch_dirs(self) -> list[str]:
        """For every detect path of an agent not yet seen: the path if it is a folder, and the nearest
        existing folder above it (where it will appear)."""
        dirs: set[str] = set()
        for defn in self.definitions.values():
            if defn.id in self.state.known:
                continue
            for raw in defn.raw.get("detect", {}).get("paths", []):
                path = self.paths.expand(raw)
                if path.is_dir():
                    dirs.add(str(path))
                folder = path.parent
                while not folder.is_dir() and folder != folder.parent:
                    folder = folder.parent
                dirs.add(str(folder))
        return sorted(dirs)

    # -- status -------------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return {"rescan_s": self.rescan_s, "scans": self.state.scans, "errors": self.state.errors,
                "last_scan_unix": self.state.last_scan_unix, "known": dict(sorted(self.state.known.items())),
                "deployed": list(self.state.deployed)}

    def _write_status(self) -> None:
        try:
            self.slot.save(self.stats())
        except sqlite3.Error as exc:
            log.warning("auto-deploy: cannot save its state: %s", exc)


def _why_not(defn: AgentDefinition) -> str:
    if not defn.enabled:
        return "disabled in its definition"
    return f"disabled by you (`agent-collector agents enable {defn.id}` allows it)"


def _load(state: KeyState) -> AutoDeployState:
    data = state.load()
    if data is None:
        return AutoDeployState()
    try:
        known = {str(k): float(v) for k, v in data.get("known", {}).items()}
        deployed = [d for d in data.get("deployed", []) if isinstance(d, dict)][-MAX_HISTORY:]
        return AutoDeployState(known, deployed, int(data.get("scans", 0)), int(data.get("errors", 0)))
    except (ValueError, TypeError, AttributeError):
        log.warning("auto-deploy: its saved state is unreadable; starting afresh")
        return AutoDeployState()


class AutoDeployPart:
    """Auto-deploy as a daemon part (:class:`collector.daemon.parts.DaemonPart`)."""

    name = "autodeploy"

    def __init__(self, definitions: Mapping[str, AgentDefinition], paths: Paths, rescan_s: float,
                 state: KeyState) -> None:
        self.deployer = AutoDeployer(definitions, paths, state, rescan_s=rescan_s)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self.deployer.run(), name="autodeploy")

    async def stop(self) -> None:
        self.deployer.stop()
        task, self._task = self._task, None
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(task, 5.0)
