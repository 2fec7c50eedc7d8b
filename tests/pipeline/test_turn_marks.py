"""Turn grouping is a pipeline step: the JSONL output carries each entry's turn (``turn.key``) and the
entries that end turns (``turn.ends``), on the real captures; the trace exporter groups by the same keys."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from support import FIXTURES, collect, prepare_fixture

from collector.exporters.turns import TurnAssembler
from collector.pipeline.turns import TurnMarker

CASES = sorted(p.parent for p in FIXTURES.glob("*/*/expected.json"))


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.name}" for c in CASES])
def test_output_carries_turn_boundaries(case: Path, tmp_path: Path) -> None:
    entries = collect(prepare_fixture(case, tmp_path))
    prompts = [e for e in entries if e["event.name"] == "user.prompt"]
    for entry in entries:
        if entry.get("gen_ai.turn.id"):
            assert entry["turn.key"] == entry["gen_ai.turn.id"], entry["event.name"]
    for prompt in prompts:
        assert prompt["turn.key"] == (prompt.get("gen_ai.turn.id") or prompt["event.id"])
    keys = {e["turn.key"] for e in entries if "turn.key" in e}
    assert {p["turn.key"] for p in prompts} <= keys
    ended = Counter(k for e in entries for k in e.get("turn.ends", []))
    assert set(ended) <= keys and all(n == 1 for n in ended.values()), "a turn ends once, and only a known one"
    for entry in entries:
        if entry["event.name"] == "session.status" and entry["session.status"] in ("ready_for_review", "closed") \
                and "turn.key" in entry:
            assert entry["turn.key"] in ended, "a finished turn is ended (by this status or before it)"
    in_order = [e for e in prompts if e["gen_ai.session.id"] == prompts[0]["gen_ai.session.id"]] if prompts else []
    for before, after in zip(in_order, in_order[1:], strict=False):
        ends_before = [e for e in entries if before["turn.key"] in e.get("turn.ends", [])]
        assert ends_before, f"turn {before['turn.key']} is ended (by a status, the next prompt or session.end)"
        assert after["turn.key"] != before["turn.key"]


def test_the_trace_exporter_uses_the_pipelines_turns(tmp_path: Path) -> None:
    """Marked entries are grouped by their ``turn.key`` alone: a turn the pipeline ended is due."""
    entries = collect(prepare_fixture(FIXTURES / "claude-code" / "two_turns_resume", tmp_path))
    asm = TurnAssembler(idle_ns=10**15)
    for entry in entries:
        asm.add(entry, 0)
    units = asm.due(0)
    ended = {k for e in entries for k in e.get("turn.ends", [])}
    assert {u.key for u in units} == ended and ended
    for unit in units:
        assert {e["turn.key"] for e in unit.entries} == {unit.key}


def test_marker_state_survives_a_restart() -> None:
    first = TurnMarker()
    prompt = {"event.name": "user.prompt", "event.id": "p1", "gen_ai.agent.type": "a", "gen_ai.session.id": "s"}
    first.apply(prompt)
    again = TurnMarker(first.state())
    later = {"event.name": "llm.response", "event.id": "r1", "gen_ai.agent.type": "a", "gen_ai.session.id": "s"}
    again.apply(later)
    end = {"event.name": "session.end", "event.id": "e1", "gen_ai.agent.type": "a", "gen_ai.session.id": "s"}
    again.apply(end)
    assert later["turn.key"] == "p1" and end["turn.ends"] == ["p1"]


def test_a_session_that_left_memory_comes_back_from_the_store() -> None:
    """One session in memory: a second session evicts the first, whose turns are saved (``changes``) and
    loaded back when its session.end comes, which then ends the turn that was open."""
    saved: dict[str, object] = {}
    marker = TurnMarker(max_sessions=1, load=saved.get)

    def entry(session: str, name: str, eid: str) -> dict[str, str]:
        return {"event.name": name, "event.id": eid, "gen_ai.agent.type": "a", "gen_ai.session.id": session}

    marker.apply(entry("s1", "user.prompt", "p1"))
    marker.apply(entry("s2", "user.prompt", "p2"))
    saved.update(marker.changes())
    assert set(saved) == {"a\x1fs1", "a\x1fs2"} and marker.changes() == []
    end = entry("s1", "session.end", "e1")
    marker.apply(end)
    assert end["turn.ends"] == ["p1"]
    assert dict(marker.changes())["a\x1fs1"] == ["p1", [], ["p1"]]
    forgetful = TurnMarker(max_sessions=1)  # no store behind it: an evicted session is forgotten
    forgetful.apply(entry("s1", "user.prompt", "p1"))
    forgetful.apply(entry("s2", "user.prompt", "p2"))
    again = entry("s1", "session.end", "e1")
    forgetful.apply(again)
    assert "turn.ends" not in again and forgetful.changes() == [("a\x1fs1", [None, [], []])]
