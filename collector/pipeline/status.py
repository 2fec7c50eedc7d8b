"""Per-session status, derived from hook events: idle, running, waiting_for_input, ready_for_review,
closed, error.

A session's state is a *base* status (what the last lifecycle event said) plus a set of open *waits*
(permission requests, questions to the user, elicitations), each keyed by the identity of the thing
that waits. The visible status is ``closed`` when closed, else ``waiting_for_input`` while any wait is
open, else the base status (:mod:`~collector.pipeline.status_state`). What each hook event does to the
state is an action (:mod:`~collector.pipeline.status_actions`).

Which hook event does what is data: each agent definition's ``status`` section, read into
:class:`~collector.definitions.status_rules.AgentStatusRules` and handed to the tracker keyed by agent id
(this module names no agent). The tracker is pure (no I/O, no clock): feed it entries
(:meth:`SessionStatusTracker.observe`, which reads ``agent.hook_event_name`` from hook-derived entries
and ignores the rest for status) or raw hook payloads (:meth:`SessionStatusTracker.observe_hook`); each
returns the ``session.status`` entries to emit. :meth:`SessionStatusTracker.sessions` is the live
picture for ``/v1/sessions``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from collector.definitions.status_rules import IGNORE, START, AgentStatusRules, When
from collector.model.entry import AgentActivityEntry, event_id
from collector.model.raw import RawRecord
from collector.pipeline.content_policy import ContentPolicy
from collector.pipeline.local_days import LocalDays
from collector.pipeline.session_cache import SessionCache
from collector.pipeline.status_actions import ACTIONS
from collector.pipeline.status_signal import (
    CONTEXT_FIELDS,
    ENTRY_FIELDS,
    Signal,
    first_value,
    hook_time_ns,
    payload_id,
)
from collector.pipeline.status_state import (
    CLOSED,
    IDLE,
    STATUSES,
    Counters,
    SessionState,
    decode_state,
    dump_state,
    session_key,
)

NEVER = 2**62  # the due time of an open session whose agent has no idle timeout
LIVE_DEFAULT_NS = 1800 * 10**9  # "live" for an agent with no idle timeout: activity within 30 min


class SessionStatusTracker:
    """Feed it events in order; it returns the ``session.status`` entries to emit."""

    def __init__(self, rules: Mapping[str, AgentStatusRules] | None = None, max_sessions: int = 2000,
                 day_of: Callable[[int], str] | None = None, digest: Callable[[Any], str | None] | None = None,
                 load: Callable[[str], Any] | None = None,
                 due: Callable[[int], Iterable[tuple[str, Any]]] | None = None,
                 idle_ns: Callable[[str], int | None] | None = None) -> None:
        """``load``: one saved session by key; ``due``: every saved session due at a time (both the checkpoint
        store's); ``idle_ns``: each agent's idle timeout, for the due time saved with a session."""
        self._rules: dict[str, AgentStatusRules] = dict(rules or {})
        # the keyed digest of the content policy, so a hook's raw tool input pairs with an entry's .hmac
        self._digest = digest if digest is not None else ContentPolicy.ephemeral().digest_value
        self._sessions: SessionCache[SessionState] = SessionCache(max_sessions, None if load is None else
                                                                  lambda key: decode_state(load(key)))
        self._due = due
        self._idle_ns = idle_ns
        self._day_of = day_of if day_of is not None else LocalDays()
        self._last_record: tuple[str, str] | None = None

    # -- input -------------------------------------------------------------------------------------

    def add_agents(self, rules: Mapping[str, AgentStatusRules]) -> None:
        """Agents known only after the start (external plugins, discovered once the ingest listens)."""
        self._rules.update(rules)

    def observe(self, entry: Mapping[str, Any], record: RawRecord | None = None) -> list[dict[str, Any]]:
        """Count an entry; if it came from a hook, apply that hook's status rule (once per hook record).

        With the hook record at hand, its raw payload is read (it has facts an entry may not keep, such
        as a notification's type); without it, the entry's own fields are used.
        """
        if record is not None and record.kind == "hook":
            out = self.observe_record(record)
            self._count_entry(entry)
            return out
        return self._observe_entry(entry)

    def observe_record(self, record: RawRecord) -> list[dict[str, Any]]:
        """Apply a hook record (a spool line or an http post, as an envelope) once, however many
        entries its parser made of it, including none (Stop, Notification)."""
        if record.kind != "hook":
            return []
        key = (record.source_id, record.position)
        if key == self._last_record:
            return []
        self._last_record = key
        data = record.data
        payload = data.get("payload")
        if not isinstance(payload, Mapping):
            return []
        event = data.get("event") or payload.get("hook_event_name")
        if not isinstance(event, str) or not event:
            return []
        time_ns = hook_time_ns(data.get("ts"), record.observed_ns)
        return self.observe_hook(record.agent, event, payload, payload_id(record.agent, event, payload, time_ns),
                                 time_ns, record.observed_ns)

    def _count_entry(self, entry: Mapping[str, Any]) -> None:
        agent, session_id = entry.get("gen_ai.agent.type"), entry.get("gen_ai.session.id")
        if (isinstance(agent, str) and isinstance(session_id, str) and session_id
                and entry.get("event.name") != "session.status"):
            self._count(self._state(agent, session_id), entry)

    def _observe_entry(self, entry: Mapping[str, Any]) -> list[dict[str, Any]]:
        agent, session_id = entry.get("gen_ai.agent.type"), entry.get("gen_ai.session.id")
        if (not isinstance(agent, str) or not isinstance(session_id, str) or not session_id
                or entry.get("event.name") == "session.status"):
            return []
        self._count(self._state(agent, session_id), entry)  # _count_entry, with what it looked up here
        hook_event = entry.get("agent.hook_event_name")
        if not isinstance(hook_event, str):
            return []
        facts = self._with_digest({name: first_value(entry, paths, walk=False) for name, paths in ENTRY_FIELDS.items()})
        time_ns = int(entry.get("time_unix_nano") or 0)
        signal = Signal(
            agent=agent,
            session_id=session_id,
            hook_event=hook_event,
            trigger_id=str(entry.get("event.id", "")),
            time_ns=time_ns,
            observed_ns=int(entry.get("observed_time_unix_nano") or time_ns),
            facts=facts,
            context={k: entry[k] for k in CONTEXT_FIELDS if entry.get(k) is not None},
        )
        return self.apply(signal)

    def observe_hook(self, agent: str, hook_event: str, payload: Mapping[str, Any], trigger_id: str,
                     time_ns: int, observed_ns: int | None = None) -> list[dict[str, Any]]:
        """Apply a raw hook payload (as the spool or the ingest server received it)."""
        rules = self._rules.get(agent)
        if rules is None:
            return []
        fields = rules.payload_fields.items()
        facts = self._with_digest({name: first_value(payload, p, walk=True) for name, p in fields})
        session_id = facts.get("session_id")
        if not session_id:
            return []
        context = {"workspace.path": facts["workspace"]} if facts.get("workspace") else {}
        signal = Signal(agent, str(session_id), hook_event, trigger_id, time_ns,
                        observed_ns if observed_ns is not None else time_ns, facts, context)
        return self.apply(signal)

    def _with_digest(self, facts: dict[str, Any]) -> dict[str, Any]:
        if facts.get("tool_args_digest") is None and facts.get("tool_input") is not None:
            facts["tool_args_digest"] = self._digest(facts["tool_input"])
        return facts

    # -- the state machine -------------------------------------------------------------------------

    def action_for(self, signal: Signal) -> str:
        rules = self._rules.get(signal.agent)
        rule = rules.rule(signal.hook_event) if rules is not None else IGNORE
        if isinstance(rule, When):
            return rule.then if rule.holds(signal.get(rule.field)) else rule.otherwise
        return rule

    def apply(self, signal: Signal) -> list[dict[str, Any]]:
        state = self._state(signal.agent, signal.session_id)
        state.last_event_ns = max(state.last_event_ns, signal.time_ns)
        state.last_hook_event = signal.hook_event
        if signal.context.get("workspace.path"):
            state.workspace = str(signal.context["workspace.path"])
        action = self.action_for(signal)
        if action == IGNORE:
            return []
        if action == START and signal.time_ns < state.last_signal_ns:
            return []  # a session start that arrives after later events (another spool file) changes nothing
        state.last_signal_ns = max(state.last_signal_ns, signal.time_ns)
        ACTIONS[action](state, signal)
        return self._emit(state, signal)

    def _emit(self, state: SessionState, signal: Signal) -> list[dict[str, Any]]:
        new = state.visible()
        if new is None or new == state.status:
            return []
        previous, state.status, state.status_since_ns = state.status, new, signal.time_ns
        attributes: dict[str, Any] = dict(signal.context)
        attributes.update({
            "session.status": new,
            "session.previous_status": previous,
            "agent.hook_event_name": signal.hook_event,
            "session.waiting.count": len(state.waits) or None,
        })
        entry = AgentActivityEntry(
            name="session.status",
            agent=signal.agent,
            time_ns=signal.time_ns,
            observed_ns=signal.observed_ns,
            id=event_id("session.status", signal.agent, signal.session_id, signal.trigger_id, new),
            session_id=signal.session_id,
            attributes=attributes,
        )
        return [entry.to_dict()]

    # -- counters ----------------------------------------------------------------------------------

    def _count(self, state: SessionState, entry: Mapping[str, Any]) -> None:
        time_ns = int(entry.get("time_unix_nano") or 0)
        state.last_event_ns = max(state.last_event_ns, time_ns)
        model = entry.get("gen_ai.response.model") or entry.get("gen_ai.request.model")
        if isinstance(model, str):
            state.model = model
        if isinstance(entry.get("workspace.path"), str):
            state.workspace = entry["workspace.path"]
        name = entry.get("event.name")
        if name not in ("llm.response", "tool.call", "tool.result", "error"):
            return
        # A tool call seen from a hook and again from the transcript counts once.
        ident = entry.get("gen_ai.tool.call.id") if name in ("tool.call", "tool.result") else None
        if not state.counted.add(f"{name}\x1f{ident or entry.get('event.id')}"):
            return
        counters = self._today(state, time_ns)
        if counters is None:
            return
        if name == "llm.response":
            counters.input_tokens += int(entry.get("gen_ai.usage.input_tokens") or 0)
            counters.output_tokens += int(entry.get("gen_ai.usage.output_tokens") or 0)
        elif name == "tool.call":
            counters.tool_calls += 1
        elif name == "error" or entry.get("tool.result.status") == "error":
            counters.errors += 1

    def _today(self, state: SessionState, time_ns: int) -> Counters | None:
        """The counters of the entry's day; None for a day older than the one being counted."""
        day = self._day_of(time_ns)
        if day > state.counters.day:
            state.counters = Counters(day=day)
        return state.counters if day == state.counters.day else None

    # -- state -------------------------------------------------------------------------------------

    def _state(self, agent: str, session_id: str) -> SessionState:
        key = session_key(agent, session_id)
        state = self._sessions.get(key)
        if state is None:
            state = SessionState(agent, session_id)
            self._sessions.put(key, state)
        return state

    def expire(self, now_ns: int, idle_ns: Callable[[str], int | None] | None = None) -> list[dict[str, Any]]:
        """Close the sessions that never say goodbye (agents whose non-interactive mode fires no session
        end): no event for their agent's idle timeout. Emits ``session.end`` (reason ``idle_timeout``) and the change to
        ``closed``, timed at the last event plus the timeout, with ids from that moment, so a replay or a
        second daemon reaches the same entries. Sessions in memory and saved ones that are due both count."""
        return [entry for lot in self.expire_lots(now_ns, idle_ns) for entry in lot]

    def expire_lots(self, now_ns: int, idle_ns: Callable[[str], int | None] | None = None,
                    lot: int | None = None) -> Iterator[list[dict[str, Any]]]:
        """:meth:`expire`, a lot at a time: the sessions in memory and the first ``lot`` saved ones due,
        then the next ``lot`` saved ones, and so on (None: all at once). The caller saves each lot (its
        commit) before it asks for the next, so memory holds one lot however many sessions wait in the
        store; the saved ones are read along one cursor, each once."""
        idle_ns = idle_ns or self._idle_ns
        if idle_ns is None:
            return
        self._idle_ns = idle_ns
        states = dict(self._sessions.items())
        handled = set(states)
        for keys in _lots(self._due(now_ns) if self._due is not None else (), handled, lot):
            for key in keys:
                state = self._sessions.get(key)  # loaded back (the memory may hold a newer one than the store)
                if state is not None:
                    states[key] = state
            yield self._close_idle(states.values(), idle_ns, now_ns)
            states = {}

    def _close_idle(self, states: Iterable[SessionState], idle_ns: Callable[[str], int | None],
                    now_ns: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for state in states:
            limit = idle_ns(state.agent)
            last = max(state.last_event_ns, state.last_signal_ns)
            if limit is None or not last or state.base == CLOSED or now_ns - last < limit:
                continue
            at = last + limit
            end = AgentActivityEntry(
                name="session.end", agent=state.agent, time_ns=at, observed_ns=now_ns,
                id=event_id(state.agent, state.session_id, "session.end", "idle_timeout", last),
                session_id=state.session_id,
                attributes={"session.reason": "idle_timeout", "source.kind": "collector"},
            )
            out.append(end.to_dict())
            state.base = CLOSED
            state.waits.clear()
            out.extend(self._emit(state, Signal(state.agent, state.session_id, "IdleTimeout", end.id, at, now_ns, {})))
            self._sessions.put(session_key(state.agent, state.session_id), state)  # to be saved closed
        return out

    def open_sessions(self) -> list[dict[str, Any]]:
        """The sessions in memory not closed yet, as JSON."""
        return [dump_state(s) for _, s in self._sessions.items() if s.base != CLOSED]

    def changes(self) -> list[tuple[str, dict[str, Any], int, int | None]]:
        """(key, state, last activity, due time) of every session changed since the last call, to be saved
        with the checkpoints, so the idle rule and the live status survive a restart and an eviction."""
        out = []
        for key, state in self._sessions.drain():
            last = max(state.last_event_ns, state.last_signal_ns)
            out.append((key, dump_state(state), last, self._due_at(state, last)))
        return out

    def _due_at(self, state: SessionState, last: int) -> int | None:
        if state.base == CLOSED:
            return None
        limit = self._idle_ns(state.agent) if self._idle_ns is not None else None
        return last + limit if limit and last else NEVER

    def restore(self, saved: Any) -> None:
        """Take back saved sessions (a list of states, least recently active first; an unreadable item is
        skipped); they are saved again with the next commit."""
        for raw in saved if isinstance(saved, list) else []:
            state = decode_state(raw)
            if state is not None:
                self._sessions.put(session_key(state.agent, state.session_id), state)

    def status_of(self, agent: str, session_id: str) -> str | None:
        key = session_key(agent, session_id)
        state = self._sessions.get(key) if key in self._sessions else None
        return state.status if state else None

    def sessions(self, now_ns: int | None = None) -> list[dict[str, Any]]:
        """The live picture, most recently active first. Counters are today's (local time)."""
        now_ns = now_ns if now_ns is not None else time.time_ns()
        today = self._day_of(now_ns)
        out = []
        for _, state in reversed(list(self._sessions.items())):
            counters = state.counters if state.counters.day == today else Counters(day=today)
            live = self._is_live(state, now_ns)
            out.append({
                "agent": state.agent,
                "session_id": state.session_id,
                "status": state.status or (IDLE if live else CLOSED),  # no hook seen: judged by its activity
                "live": live,
                "status_since_unix_nano": state.status_since_ns or None,
                "last_event_unix_nano": state.last_event_ns or None,
                "last_hook_event": state.last_hook_event,
                "workspace": state.workspace,
                "model": state.model,
                "input_tokens_today": counters.input_tokens,
                "output_tokens_today": counters.output_tokens,
                "tool_calls_today": counters.tool_calls,
                "errors_today": counters.errors,
                "waiting_for": [w.to_dict(k) for k, w in state.waits.items()],
            })
        return out

    def _is_live(self, state: SessionState, now_ns: int) -> bool:
        """Not closed, and active within its agent's idle timeout (30 min for an agent that has none)."""
        if state.status == CLOSED or state.base == CLOSED:
            return False
        limit = self._idle_ns(state.agent) if self._idle_ns is not None else None
        last = max(state.last_event_ns, state.last_signal_ns)
        return bool(last) and now_ns - last < (limit or LIVE_DEFAULT_NS)

    def summary(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUSES, 0)
        for _, state in self._sessions.items():
            if state.status:
                counts[state.status] += 1
        return counts


def _lots(due: Iterable[tuple[str, Any]], handled: set[str], size: int | None) -> Iterator[list[str]]:
    """The keys of ``due`` not in ``handled`` (which gains them), ``size`` at a time; one lot, maybe
    empty, at the least (the sessions in memory go with it)."""
    keys: list[str] = []
    for key, _raw in due:
        if key in handled:
            continue
        handled.add(key)
        keys.append(key)
        if size is not None and len(keys) >= size:
            yield keys
            keys = []
    yield keys
