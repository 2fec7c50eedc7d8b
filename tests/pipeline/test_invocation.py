"""Per-invocation context: the W3C traceparent parser, the attribute text's checks, and the per-session
memory that stamps every entry of a session (fill-only, bounded, saved and loaded back)."""

from __future__ import annotations

from typing import Any

import pytest

from collector.model import RawRecord
from collector.pipeline.attributes import GlobalAttributes
from collector.pipeline.invocation import (
    MAX_CHANGES,
    PARENT_SPAN_ID,
    TRACE_ID,
    Context,
    Invocations,
    decode,
    encode,
    parse_attributes,
    parse_traceparent,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"  # the W3C recommendation's own example
PARENT = "00f067aa0ba902b7"


def hook(agent: str = "qwen-code", **context: Any) -> RawRecord:
    data = {"ts": 1.0, "agent": agent, "event": "SessionStart", **context, "payload": {"session_id": "s1"}}
    return RawRecord(agent, "hook", data, "spool", "0", 1)


def entry(session: str = "s1", agent: str = "qwen-code", **fields: Any) -> dict[str, Any]:
    return {"event.name": "llm.response", "gen_ai.agent.type": agent, "gen_ai.session.id": session, **fields}


# -- traceparent -------------------------------------------------------------------------------------------


def test_a_version_00_traceparent_gives_its_ids() -> None:
    parsed = parse_traceparent(f"00-{TRACE}-{PARENT}-01")
    assert parsed is not None and (parsed.trace_id, parsed.parent_id, parsed.flags) == (TRACE, PARENT, "01")


def test_a_later_version_is_read_by_its_first_four_fields() -> None:  # Trace Context 3.2.4
    parsed = parse_traceparent(f"cc-{TRACE}-{PARENT}-01-what-the-future-adds")
    assert parsed is not None and parsed.trace_id == TRACE


@pytest.mark.parametrize("text", [
    f"ff-{TRACE}-{PARENT}-01",  # version ff is invalid
    f"00-{TRACE}-{PARENT}-01-extra",  # version 00 has exactly four fields
    f"cc-{TRACE}-{PARENT}-01x",  # what follows the fourth field starts with a dash
    f"00-{TRACE.upper()}-{PARENT}-01",  # lowercase only
    f"00-{'0' * 32}-{PARENT}-01",  # all-zero trace id
    f"00-{TRACE}-{'0' * 16}-01",  # all-zero parent id
    f"00-{TRACE[:-1]}-{PARENT}0-01",  # the dashes in the wrong place
    f"00-{TRACE}-{PARENT}",  # no flags
    "", "00", 55, None, False,
])
def test_anything_else_is_no_traceparent(text: Any) -> None:
    assert parse_traceparent(text) is None


# -- attribute text ----------------------------------------------------------------------------------------


def test_attribute_text_is_the_otel_list_form_checked_like_the_global_ones() -> None:
    problems: dict[str, int] = {}
    pairs = parse_attributes("ticket=OPS-12, team = a%20b ,gen_ai.agent.type=x,line=a%0Ab", problems)
    assert pairs == {"ticket": "OPS-12", "team": "a b"}
    assert len(problems) == 2
    assert any("gen_ai.agent.type" in p and "sets itself" in p for p in problems)
    assert any("'line'" in p and "control character" in p for p in problems)


def test_a_malformed_text_is_discarded_whole_and_a_refused_one_counted() -> None:
    problems: dict[str, int] = {}
    assert parse_attributes("a=1,nonsense", problems) == {}
    assert parse_attributes(False, problems) == {}
    assert parse_attributes("x" * 2000, problems) == {}
    assert parse_attributes(["a=1"], problems) == {}
    reasons = sorted(problems)
    assert len(reasons) == 3 and sum(problems.values()) == 4
    assert any("discarded" in r for r in reasons) and any("refused by the hook" in r for r in reasons)


# -- the per-session memory -------------------------------------------------------------------------------


def test_every_entry_of_the_session_gets_the_attributes_and_only_fills() -> None:
    inv = Invocations()
    inv.observe(hook(attributes="team=a,ticket=T-1", traceparent=f"00-{TRACE}-{PARENT}-01"), [entry()])
    stamped = entry(team="the agent's own")
    inv.apply(stamped)
    assert stamped["team"] == "the agent's own" and stamped["ticket"] == "T-1"
    assert stamped["collector.custom_attributes"] == ["ticket"], "only what it added"
    GlobalAttributes({"site": "x", "ticket": "global"}, {}, None).apply(stamped)
    assert stamped["ticket"] == "T-1" and stamped["collector.custom_attributes"] == ["site", "ticket"]
    assert TRACE_ID not in stamped, "no trace link unless it is switched on"
    other, no_session = entry("s2"), {"event.name": "error", "gen_ai.agent.type": "qwen-code"}
    inv.apply(other)
    inv.apply(no_session)
    assert "ticket" not in other and "ticket" not in no_session
    other_agent = entry(agent="codex")
    inv.apply(other_agent)
    assert "ticket" not in other_agent, "sessions are per agent"


def test_with_the_switch_on_the_upstream_span_is_stamped() -> None:
    inv = Invocations(link_traces=True)
    inv.observe(hook(traceparent=f"00-{TRACE}-{PARENT}-01"), [entry()])
    stamped = entry()
    inv.apply(stamped)
    assert (stamped[TRACE_ID], stamped[PARENT_SPAN_ID]) == (TRACE, PARENT)


def test_a_bad_traceparent_is_ignored_and_counted_the_attributes_still_used() -> None:
    inv = Invocations(link_traces=True)
    inv.observe(hook(attributes="team=a", traceparent="00-nothex"), [entry()])
    inv.observe(hook(attributes="team=a", traceparent=False), [entry()])
    stamped = entry()
    inv.apply(stamped)
    assert stamped["team"] == "a" and TRACE_ID not in stamped
    assert inv.problems == {"TRACEPARENT: not a W3C traceparent, ignored": 2}


def test_records_that_name_no_context_change_nothing() -> None:
    inv = Invocations()
    inv.observe(hook(attributes="team=a"), [entry()])
    inv.observe(hook(), [entry()])  # a later hook of the same run without the variables
    inv.observe(RawRecord("qwen-code", "transcript", {"attributes": "team=b"}, "f", "0", 1), [entry()])
    stamped = entry()
    inv.apply(stamped)
    assert stamped["team"] == "a"


def test_a_process_that_resumed_the_session_brings_its_own_from_its_time_on() -> None:
    inv = Invocations()
    inv.observe(hook(attributes="team=b"), [entry(time_unix_nano=200)])  # read first: arrival order is no order
    inv.observe(hook(attributes="team=a,ticket=1"), [entry(time_unix_nano=100)])
    inv.observe(hook(attributes="team=a,ticket=1"), [entry(time_unix_nano=150)])
    inv.observe(hook(attributes="team=c"), [entry(time_unix_nano=300)])
    teams = []
    for time_ns in (50, 100, 199, 200, 250, 300, 10**19):
        stamped = entry(time_unix_nano=time_ns)
        inv.apply(stamped)
        teams.append((stamped["team"], stamped.get("ticket")))
    assert teams == [("a", "1"), ("a", "1"), ("a", "1"), ("b", None), ("b", None), ("c", None), ("c", None)]


def test_a_session_keeps_at_most_max_changes_contexts() -> None:
    inv = Invocations()
    for n in range(MAX_CHANGES + 5):
        inv.observe(hook(attributes=f"n={n}"), [entry(time_unix_nano=n)])
    ((_, saved),) = inv.changes()
    assert len(saved) == MAX_CHANGES and saved[-1][1]["attributes"] == {"n": str(MAX_CHANGES + 4)}


def test_memory_is_bounded_and_an_evicted_session_comes_back_from_the_store() -> None:
    store: dict[str, Any] = {}
    inv = Invocations(max_sessions=2, load=store.get)
    for n in range(5):
        inv.observe(hook(attributes=f"n={n}"), [entry(f"s{n}")])
    assert len(inv._sessions) == 2
    store.update(inv.changes())  # what a commit writes
    assert len(store) == 5
    again = Invocations(max_sessions=2, load=store.get)  # a restart
    for n in range(5):
        stamped = entry(f"s{n}")
        again.apply(stamped)
        assert stamped["n"] == str(n)


def test_saved_state_is_read_back_only_in_its_own_shape() -> None:
    state = [(5, Context({"team": "a"}, TRACE, PARENT)), (9, Context())]
    assert decode(encode(state)) == state
    for bad in (None, [], {}, [[5]], [["5", {"attributes": {}, "trace_id": "", "parent_id": ""}]],
                [[5, {"attributes": {"a": 1}, "trace_id": "", "parent_id": ""}]],
                [[5, {"attributes": {}, "trace_id": None, "parent_id": ""}]]):
        assert decode(bad) is None, bad


def test_with_nothing_saved_nothing_is_looked_up_until_a_record_names_a_context() -> None:
    asked: list[str] = []

    def load(key: str) -> Any:
        asked.append(key)
        return None

    inv = Invocations(load=load, saved=False)
    inv.apply(entry())
    assert asked == [], "most runs have no context: no lookup per entry"
    inv.observe(hook(attributes="team=a"), [entry()])
    stamped, other = entry(), entry("s2")
    inv.apply(stamped)
    inv.apply(other)
    assert stamped["team"] == "a" and "team" not in other and asked
