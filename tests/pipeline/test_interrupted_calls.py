"""A tool call that never got a result is closed as interrupted once its session has ended, at the end of
the cycle (so a result from another input of the same cycle still wins)."""

from __future__ import annotations

import json
from typing import Any

from collector.model import event_id
from collector.pipeline.correlate import Correlator


def entry(name: str, t: int, **attrs: Any) -> dict[str, Any]:
    return {"event.id": f"{name}{t}", "event.name": name, "time_unix_nano": t, "gen_ai.agent.type": "a",
            "gen_ai.session.id": "s", **attrs}


def test_an_open_call_of_an_ended_session_is_closed_as_interrupted() -> None:
    c = Correlator()
    c.apply(entry("user.prompt", 1, **{"gen_ai.turn.id": "t1"}))
    c.apply(entry("tool.call", 2, **{"gen_ai.tool.call.id": "open", "gen_ai.tool.name": "bash"}))
    c.apply(entry("tool.call", 3, **{"gen_ai.tool.call.id": "done", "gen_ai.tool.name": "bash"}))
    c.apply(entry("tool.result", 4, **{"gen_ai.tool.call.id": "done"}))
    assert c.close_interrupted(99) == [], "the session has not ended"
    c = Correlator(json.loads(json.dumps(c.state())))  # the open calls survive a restart
    c.apply(entry("session.end", 10))
    (closed,) = c.close_interrupted(99)
    assert closed["event.id"] == event_id("a", "s", "tool.result", "open"), "the id a real result would have"
    assert (closed["tool.result.status"], closed["error.type"]) == ("cancelled", "interrupted")
    assert (closed["gen_ai.turn.id"], closed["gen_ai.tool.name"], closed["time_unix_nano"]) == ("t1", "bash", 10)
    assert c.close_interrupted(99) == [], "closed once"


def test_a_late_copy_of_a_call_with_a_result_opens_nothing() -> None:
    c = Correlator()
    c.apply(entry("tool.call", 2, **{"gen_ai.tool.call.id": "x"}))
    c.apply(entry("tool.result", 3, **{"gen_ai.tool.call.id": "x"}))
    c.apply(entry("tool.call", 2, **{"gen_ai.tool.call.id": "x"}))  # the same call from the other input
    c.apply(entry("session.end", 5))
    assert c.close_interrupted(9) == []


def test_a_call_made_after_the_end_stays_open() -> None:
    """A resumed session: the end belongs to the first process, the call to the next one."""
    c = Correlator()
    c.apply(entry("session.end", 5))
    c.apply(entry("tool.call", 7, **{"gen_ai.tool.call.id": "later"}))
    assert c.close_interrupted(9) == []
    c.apply(entry("session.end", 12))
    assert [e["gen_ai.tool.call.id"] for e in c.close_interrupted(13)] == ["later"]
