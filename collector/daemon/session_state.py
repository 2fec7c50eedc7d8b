"""The pipeline's per-session state in the checkpoint store: the correlator's, the status tracker's,
the turn marker's, the invocation contexts' and the upstream turn links' sessions, one scope each
(``CheckpointStore.session``), so that memory holds at most ``collector.sessions_in_memory`` of them and a
session evicted or left open at a stop is loaded back when its agent writes again (or the idle rule closes it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from collector.definitions.status_rules import AgentStatusRules
from collector.pipeline.correlate import Correlator
from collector.pipeline.correlation_files import CorrelationFiles
from collector.pipeline.invocation import Invocations
from collector.pipeline.status import SessionStatusTracker
from collector.pipeline.turn_links import TurnLinks
from collector.pipeline.turns import TurnMarker
from collector.state.checkpoints import CheckpointStore, Commit, SessionRow

SESSIONS_KEY = "status.sessions"  # where an older version kept the status tracker's open sessions
CORRELATOR_SCOPE = "correlator"  # per-session state in the checkpoint store (collector.pipeline.session_cache)
STATUS_SCOPE = "status"
TURNS_SCOPE = "turns"
INVOCATIONS_SCOPE = "invocations"
TURN_LINKS_SCOPE = "turn_links"
OLDER_KEYS = ("correlator", SESSIONS_KEY, "turns")  # an older version's all-in-one values, one per part


@dataclass(slots=True)
class SessionState:
    """Owns the link between the session-keeping parts and their scopes in ``store``: it makes each part
    (loading a session on demand, the status tracker's due sessions for the idle rule), gives the rows a
    commit saves (``rows``: what changed since the last one) and moves an older version's values into
    the scopes (``migrate``)."""

    store: CheckpointStore
    correlator: Correlator | None = None
    status: SessionStatusTracker | None = None
    turns: TurnMarker | None = None
    invocations: Invocations | None = None
    turn_links: TurnLinks | None = None

    def make_correlator(self, cap: int) -> Correlator:
        store = self.store
        self.correlator = Correlator(store.get("correlator", {}), max_sessions=cap,
                                     load=lambda key: store.session(CORRELATOR_SCOPE, key))
        return self.correlator

    def make_status(self, rules: Mapping[str, AgentStatusRules], cap: int, digest: Callable[[Any], str | None],
                    idle_ns: Callable[[str], int | None]) -> SessionStatusTracker:
        """The tracker, with the open sessions back: they wait out their idle timeout, and the live view
        starts with the most recent of them."""
        store = self.store
        self.status = SessionStatusTracker(rules, max_sessions=cap, digest=digest,
                                           load=lambda key: store.session(STATUS_SCOPE, key),
                                           due=lambda now: store.sessions_due(STATUS_SCOPE, now), idle_ns=idle_ns)
        self.status.restore([v for _, v in store.recent_sessions(STATUS_SCOPE, cap, open_only=True)])
        self.status.restore(store.get(SESSIONS_KEY, []))  # as an older version saved them
        return self.status

    def make_turns(self, cap: int) -> TurnMarker:
        store = self.store
        self.turns = TurnMarker(store.get("turns"), cap, lambda key: store.session(TURNS_SCOPE, key))
        return self.turns

    def make_invocations(self, cap: int, link_traces: bool) -> Invocations:
        store = self.store
        self.invocations = Invocations(link_traces, cap, lambda key: store.session(INVOCATIONS_SCOPE, key),
                                       saved=bool(store.recent_sessions(INVOCATIONS_SCOPE, 1)))
        return self.invocations

    def make_turn_links(self, cap: int, files: CorrelationFiles) -> TurnLinks:
        store = self.store
        self.turn_links = TurnLinks(files, cap, lambda key: store.session(TURN_LINKS_SCOPE, key))
        return self.turn_links

    def rows(self) -> list[SessionRow]:
        """The per-session state changed since the last commit (correlator, turn marker, status tracker)."""
        rows = []
        if self.correlator is not None and self.turns is not None:
            rows = [SessionRow(CORRELATOR_SCOPE, k, v, last) for k, v, last in self.correlator.changes()]
            rows += [SessionRow(TURNS_SCOPE, k, v) for k, v in self.turns.changes()]
        if self.invocations is not None:
            rows += [SessionRow(INVOCATIONS_SCOPE, k, v) for k, v in self.invocations.changes()]
        if self.turn_links is not None:
            rows += [SessionRow(TURN_LINKS_SCOPE, k, v) for k, v in self.turn_links.changes()]
        if self.status is not None:
            rows += [SessionRow(STATUS_SCOPE, k, v, last, due) for k, v, last, due in self.status.changes()]
        return rows

    def migrate(self) -> None:
        """An older version's all-in-one values were taken by the parts: saved per session, then emptied."""
        if any(self.store.get(key) for key in OLDER_KEYS):
            self.store.commit(Commit(sessions=self.rows(), kv={"correlator": {}, SESSIONS_KEY: [], "turns": {}}))
