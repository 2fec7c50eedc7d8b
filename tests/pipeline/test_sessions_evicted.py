"""Per-session state that leaves memory waits in the checkpoint store: an agent's output is the same
whether its data is collected alone or beside the other agents' (with room for one session in memory)."""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

from support import FIXTURES, collect, make_paths

from collector.config import load_config
from collector.pipeline.correlate import Correlator
from collector.pipeline.status import SessionStatusTracker

AGENTS = ("claude-code", "codex", "gemini-cli", "opencode", "qwen-code")
CASE = "tool_then_answer"


def _home(tmp: Path, agents: tuple[str, ...], settings: str) -> list[dict[str, Any]]:
    paths = make_paths(tmp)
    paths.home.mkdir(parents=True)
    for agent in agents:
        case = FIXTURES / agent / CASE
        if (case / "home").exists():
            shutil.copytree(case / "home", paths.home, symlinks=True, dirs_exist_ok=True)
        if (case / "spool").exists():
            shutil.copytree(case / "spool", paths.spool_dir, dirs_exist_ok=True)
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(settings)
    return collect(paths, config=load_config(paths.config_file, env={}))


def _by_agent(entries: list[dict[str, Any]]) -> dict[str, list[tuple[Any, ...]]]:
    out: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for e in entries:
        out[e["gen_ai.agent.type"]].append((e["event.id"], e.get("gen_ai.turn.id"), e.get("session.status"),
                                            e.get("duration_ms"), e.get("gen_ai.subagent.parent_tool_call.id"),
                                            e.get("turn.key"), e.get("turn.ends")))
    return {k: sorted(v, key=repr) for k, v in out.items()}


def test_an_agents_output_is_the_same_alone_or_mixed_with_evictions(tmp_path: Path) -> None:
    alone: dict[str, list[tuple[Any, ...]]] = {}
    for agent in AGENTS:
        alone.update(_by_agent(_home(tmp_path / agent, (agent,), "")))
    mixed = _by_agent(_home(tmp_path / "mixed", AGENTS, "[collector]\nsessions_in_memory = 1\nbatch_size = 3\n"))
    assert set(alone) == set(AGENTS)
    for agent in AGENTS:
        assert mixed[agent] == alone[agent], agent
    ends = [x for agent in ("opencode", "qwen-code") for x in mixed[agent] if x[2] == "closed"]
    assert len(ends) >= 2  # the idle rule closed sessions that had left memory


def test_the_correlator_takes_an_evicted_session_back_from_the_store() -> None:
    saved: dict[str, Any] = {}
    correlator = Correlator(load=saved.get, max_sessions=1)

    def entry(session: str, name: str, t: int, **extra: Any) -> dict[str, Any]:
        return {"gen_ai.agent.type": "a", "gen_ai.session.id": session, "event.name": name,
                "time_unix_nano": t, **extra}

    correlator.apply(entry("s1", "user.prompt", 1, **{"gen_ai.turn.id": "turn-1"}))
    correlator.apply(entry("s1", "tool.call", 2, **{"gen_ai.tool.call.id": "c1", "gen_ai.tool.name": "Bash"}))
    correlator.apply(entry("s2", "user.prompt", 3, **{"gen_ai.turn.id": "turn-2"}))  # s1 leaves memory
    saved.update({key: state for key, state, _ in correlator.changes()})
    assert "a\x1fs1" in saved and "a\x1fs1" not in correlator.state()
    result = entry("s1", "tool.result", 2_000_000_002, **{"gen_ai.tool.call.id": "c1"})
    correlator.apply(result)
    assert (result["gen_ai.turn.id"], result["gen_ai.tool.name"], result["duration_ms"]) == ("turn-1", "Bash", 2000)


def test_the_idle_rule_closes_a_session_that_waits_in_the_store() -> None:
    saved: dict[str, tuple[Any, int | None]] = {}
    limit = 10

    def due(now: int) -> list[tuple[str, Any]]:
        return [(k, v) for k, (v, at) in saved.items() if at is not None and at <= now]

    tracker = SessionStatusTracker(load=lambda k: saved.get(k, (None, None))[0], due=due,
                                   idle_ns=lambda agent: limit, max_sessions=1)
    for n, sid in enumerate(("s1", "s2")):
        tracker.observe({"gen_ai.agent.type": "a", "gen_ai.session.id": sid, "event.name": "tool.call",
                         "time_unix_nano": 100 + n})
    saved.update({k: (v, at) for k, v, _, at in tracker.changes()})
    assert saved["a\x1fs1"][1] == 110
    out = tracker.expire(now_ns=200)
    ends = sorted(e["gen_ai.session.id"] for e in out if e["event.name"] == "session.end")
    assert ends == ["s1", "s2"]
    saved.update({k: (v, at) for k, v, _, at in tracker.changes()})
    assert saved["a\x1fs1"][1] is None and saved["a\x1fs2"][1] is None  # saved closed: never due again
    assert tracker.expire(now_ns=300) == []


def test_the_idle_rule_reads_every_due_session_page_by_page(tmp_path: Path) -> None:
    """The store hands out every due session, in due order, however small its page: a session past the
    first page is not left open (``collect --once`` asks once)."""
    from collector.state.checkpoints import CheckpointStore, Commit, SessionRow

    store = CheckpointStore(tmp_path / "c.sqlite")
    try:
        rows = [SessionRow("status", f"a\x1fs{n}", {"n": n}, last=n, due=100 + n % 3) for n in range(7)]
        rows.append(SessionRow("status", "a\x1fclosed", {"n": -1}, last=1, due=None))
        rows.append(SessionRow("status", "a\x1flater", {"n": -2}, last=1, due=500))
        rows.append(SessionRow("correlator", "a\x1fs0", {"n": -3}, last=1, due=50))
        store.commit(Commit(sessions=rows))
        for page in (1, 2, 3, 1000):
            due = list(store.sessions_due("status", 200, page=page))
            assert [v["n"] for _, v in due] == [0, 3, 6, 1, 4, 2, 5], page
    finally:
        store.close()


def test_every_evicted_session_gets_its_idle_end_past_one_page(tmp_path: Path, monkeypatch: Any) -> None:
    """With one session in memory, a page of one and a lot of one, the sessions waiting in the store are
    still all closed by the idle rule at the end of ``collect --once``: the same entries as each agent
    alone."""
    from collector.daemon import idle_rule
    from collector.state import checkpoints

    alone: dict[str, list[tuple[Any, ...]]] = {}
    for agent in AGENTS:
        alone.update(_by_agent(_home(tmp_path / agent, (agent,), "")))
    monkeypatch.setattr(checkpoints, "DUE_PAGE", 1)
    monkeypatch.setattr(idle_rule, "IDLE_LOT", 1)
    mixed = _by_agent(_home(tmp_path / "mixed", AGENTS, "[collector]\nsessions_in_memory = 1\n"))
    for agent in AGENTS:
        assert mixed[agent] == alone[agent], agent


def test_the_idle_rule_closes_saved_sessions_a_lot_at_a_time() -> None:
    """Each lot loads at most ``lot`` saved sessions (the first one also closes those in memory); the
    caller commits a lot before it asks for the next, and no session comes twice."""
    saved: dict[str, tuple[Any, int | None]] = {}

    def due(now: int) -> list[tuple[str, Any]]:
        return [(k, v) for k, (v, at) in sorted(saved.items()) if at is not None and at <= now]

    def commit() -> None:
        saved.update({k: (v, at) for k, v, _, at in tracker.changes()})

    tracker = SessionStatusTracker(load=lambda k: saved.get(k, (None, None))[0], due=due,
                                   idle_ns=lambda agent: 10, max_sessions=2)
    for n in range(7):
        tracker.observe({"gen_ai.agent.type": "a", "gen_ai.session.id": f"s{n}", "event.name": "tool.call",
                         "time_unix_nano": 100 + n})
    commit()
    lots = []
    for lot in tracker.expire_lots(now_ns=1000, lot=2):
        lots.append(sorted(e["gen_ai.session.id"] for e in lot if e["event.name"] == "session.end"))
        commit()
    assert lots == [["s0", "s1", "s5", "s6"], ["s2", "s3"], ["s4"]], "memory (s5, s6) with the first lot"
    assert due(2000) == [], "every one saved closed"
    assert list(tracker.expire_lots(now_ns=2000, lot=2)) == [[]], "nothing comes back"
