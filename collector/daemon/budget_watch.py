"""The daemon's budget check (``collector.usage.budget``), run by the worker after a cycle that delivered
entries (at most once a second) and at least every ``REFRESH_S``. Each check:

* writes ``<state dir>/spend.json``: today's cost, the current 5-hour block, the cost of today's sessions
  and every limit's state, the small cache `agent-collector statusline` reads (no store scan per call);
* makes a ``budget.threshold`` entry for each limit at ``warn`` or ``over`` in its current window (its id
  is the limit, the window and the level: the dedupe set keeps it to one per window, across restarts) and
  announces the fresh ones (``collector.daemon.budget_notify``);
* keeps one refusal file per (agent, event) while a ``hard`` limit is over, ``<spool dir>/.refuse/
  <agent>.<event>``, for the agents whose definition names a ``refuse`` event: the hook script reads it
  (one file test) and refuses the prompt. Each file carries an expiry ``REFUSE_TTL_S`` ahead, renewed by
  every check, and the daemon removes them when it stops: a daemon that is down refuses nothing."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from collector import SCHEMA_VERSION
from collector.config import Config
from collector.daemon.budget_notify import announce, message
from collector.definitions import AgentDefinition
from collector.exporters.usage import store_settings
from collector.model.entry import event_id
from collector.paths import Paths
from collector.usage.budget import LimitState, evaluate, settings, spend_summary
from collector.usage.prices import CACHE_NAME, PriceTable
from collector.usage.store import connect, store_file
from collector.util.atomic import atomic_write
from collector.util.timezones import local_zone

log = logging.getLogger("collector")
REFRESH_S = 30.0
MIN_GAP_S = 1.0
REFUSE_TTL_S = 120
SPEND_FILE = "spend.json"
REFUSE_DIR = ".refuse"
Deliver = Callable[[list[dict[str, Any]], Any], list[dict[str, Any]]]


def refuse_rules(definitions: Mapping[str, AgentDefinition]) -> dict[str, tuple[str, int]]:
    """agent -> (hook event whose hook can refuse, exit code that refuses), from each definition's ``refuse``."""
    rules = {}
    for agent, definition in definitions.items():
        spec = definition.raw.get("refuse")
        if isinstance(spec, dict):
            rules[agent] = (str(spec["event"]), int(spec.get("exit_code", 2)))
    return rules


class BudgetWatch:
    def __init__(self, config: Config, paths: Paths, definitions: Mapping[str, AgentDefinition],
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings(config.budget)
        self._config_prices = config.prices
        store = store_settings(config)
        self._store = store_file(paths.data_dir, store) if store.enabled else None
        self._spend_file = paths.state_dir / SPEND_FILE
        self._refuse_dir = paths.spool_dir / REFUSE_DIR
        self._definitions = definitions  # filled by the Service's startup
        self._clock = clock
        self._prices: PriceTable | None = None
        self._last = -REFRESH_S
        self._states: list[LimitState] = []
        self._written: set[Path] = set()

    def due(self, entries: int) -> bool:
        if self._store is None:
            return False
        since = time.monotonic() - self._last
        return since >= REFRESH_S or (entries > 0 and since >= MIN_GAP_S)

    def check(self, deliver: Deliver, result: Any) -> list[dict[str, Any]]:
        """One check (see the module); returns the fresh threshold entries ``deliver`` took."""
        self._last = time.monotonic()
        now = self._clock()
        try:
            summary, self._states = self._read(now)
        except (sqlite3.Error, OSError) as exc:
            log.info("budget check skipped: %s", exc)
            return []
        except Exception:  # noqa: BLE001 - a check that fails must not stop the daemon's delivery
            log.exception("budget check failed")
            return []
        self._write_spend(now, summary)
        self._keep_refusals(now)
        fresh = deliver(self._entries(now), result)
        announce(fresh, self.settings.webhook, self.settings.notify)
        return fresh

    def _read(self, now: float) -> tuple[dict[str, Any], list[LimitState]]:
        assert self._store is not None
        if not self._store.exists():
            return {}, []
        if self._prices is None:
            self._prices = PriceTable(self._store.with_name(CACHE_NAME), self._config_prices)
        tz, _ = local_zone()
        db = connect(self._store, readonly=True)
        try:
            summary = spend_summary(db, now, tz, self._prices)
            states = evaluate(db, self.settings.limits, now, tz, self._prices)
        finally:
            db.close()
        return summary, states

    def _write_spend(self, now: float, summary: dict[str, Any]) -> None:
        body = {"updated": now, "pid": os.getpid(), **summary, "budgets": [s.as_dict() for s in self._states]}
        try:
            atomic_write(self._spend_file, orjson.dumps(body))
        except OSError as exc:
            log.warning("cannot write %s: %s", self._spend_file, exc)

    def _entries(self, now: float) -> list[dict[str, Any]]:
        return [self._entry(state, now) for state in self._states if state.level != "ok"]

    @staticmethod
    def _entry(state: LimitState, now: float) -> dict[str, Any]:
        limit, level = state.limit, state.level
        agent, _, session = (state.session or "").partition(" ")
        entry: dict[str, Any] = {
            "schema.version": SCHEMA_VERSION, "event.name": "budget.threshold",
            "event.id": event_id("budget.threshold", limit.name, limit.period, state.window_start_ns,
                                 state.session, level),
            "time_unix_nano": int(now * 1e9), "observed_time_unix_nano": int(now * 1e9),
            "gen_ai.agent.type": agent or limit.agent or "agent-collector",
            "budget.name": limit.name, "budget.period": limit.period, "budget.unit": limit.unit,
            "budget.amount": limit.amount, "budget.spent": round(state.spent, 6),
            "budget.fraction": round(state.fraction, 4), "budget.level": level, "budget.hard": limit.hard,
            "budget.window.start_unix_nano": state.window_start_ns,
        }
        if session:
            entry["gen_ai.session.id"] = session
        for key in ("project", "repo"):
            if getattr(limit, key):
                entry[f"budget.{key}"] = getattr(limit, key)
        return entry

    def _keep_refusals(self, now: float) -> None:
        wanted: dict[Path, bytes] = {}
        rules = refuse_rules(self._definitions)
        for state in self._states:
            if not (state.limit.hard and state.level == "over"):
                continue
            agents = [state.limit.agent] if state.limit.agent else list(rules)
            for agent in agents:
                if agent in rules:
                    event, code = rules[agent]
                    text = message(self._entry(state, now)) + "; prompts are refused until the period ends " \
                        "or the limit is raised ([budget] in config.toml)"
                    wanted[self._refuse_dir / f"{agent}.{event}"] = (
                        f"{int(now) + REFUSE_TTL_S} {code}\nagent-collector: {text}\n".encode())
        for path, body in wanted.items():
            try:
                atomic_write(path, body)
            except OSError as exc:
                log.warning("cannot write %s: %s", path, exc)
        for path in self._written - set(wanted):
            path.unlink(missing_ok=True)
        self._written = set(wanted)

    def status(self) -> dict[str, Any]:
        """The snapshot's ``budget``: how many limits, and those at ``warn`` or ``over``."""
        return {"limits": len(self.settings.limits),
                "crossed": [s.as_dict() for s in self._states if s.level != "ok"]}

    def close(self) -> None:
        """The daemon stops: no refusal outlives it."""
        for path in self._written:
            path.unlink(missing_ok=True)
        self._written = set()
