"""The pure parts of the trace exporter: span tree from a turn's entries, and turn grouping."""

from __future__ import annotations

from typing import Any

from collector.exporters.trace_builder import (
    SpanData,
    TurnInput,
    build_spans,
    root_span_id,
    tool_span_id,
    trace_id_for,
)
from collector.exporters.turns import TurnAssembler

S = "sess-1"
MS = 1_000_000
T0 = 1_800_000_000_000_000_000


def e(name: str, t_ms: int, **fields: Any) -> dict[str, Any]:
    entry = {
        "event.name": name,
        "event.id": f"{name}-{t_ms}-{fields.get('gen_ai.tool.call.id', '')}",
        "time_unix_nano": T0 + t_ms * MS,
        "gen_ai.agent.type": "claude-code",
        "gen_ai.session.id": S,
    }
    entry.update({k.replace("__", "."): v for k, v in fields.items()})
    return entry


def llm(t_req: int, t_resp: int, rid: str, inp: int, out: int, **extra: Any) -> list[dict[str, Any]]:
    common = {"gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-sonnet-4-5", **extra}
    return [
        e("llm.request", t_req, **{"gen_ai.request.id": f"req-{rid}"}, **common),
        e(
            "llm.response",
            t_resp,
            **{
                "gen_ai.request.id": f"req-{rid}",
                "gen_ai.response.id": rid,
                "gen_ai.usage.input_tokens": inp,
                "gen_ai.usage.output_tokens": out,
                "gen_ai.usage.cache_read.input_tokens": 5,
                "gen_ai.response.finish_reasons": ["end_turn"],
            },
            **common,
        ),
    ]


def turn_with_subagent() -> list[dict[str, Any]]:
    sub = {"gen_ai.agent.scope": "subagent", "gen_ai.subagent.parent_tool_call.id": "task-1"}
    return [
        e("user.prompt", 0, **{"gen_ai.turn.id": "t1", "gen_ai.input.messages.length": 10}),
        *llm(10, 100, "m1", 100, 10),
        e("tool.call", 110, **{"gen_ai.tool.name": "Task", "gen_ai.tool.call.id": "task-1"}),
        e("subagent.start", 120, **sub, **{"gen_ai.subagent.type": "Explore"}),
        *llm(130, 200, "m2", 50, 5, **sub),
        e("tool.call", 210, **sub, **{"gen_ai.tool.name": "Read", "gen_ai.tool.call.id": "read-1"}),
        e(
            "tool.result",
            230,
            **sub,
            **{
                "gen_ai.tool.name": "Read",
                "gen_ai.tool.call.id": "read-1",
                "tool.result.status": "error",
                "error.type": "file_not_found",
            },
        ),  # noqa: E501
        e("subagent.end", 240, **sub),
        e(
            "tool.result",
            250,
            **{"gen_ai.tool.name": "Task", "gen_ai.tool.call.id": "task-1", "tool.result.status": "success"},
        ),  # noqa: E501
        *llm(260, 300, "m3", 200, 20),
        e("session.status", 310, **{"session.status": "ready_for_review"}),
    ]


def by_name(spans: list[Any]) -> dict[str, Any]:
    return {s.name: s for s in spans}


def test_span_tree_names_kinds_parents_and_times() -> None:
    spans = build_spans(TurnInput("claude-code", S, "t1", turn_with_subagent()))
    names = sorted(s.name for s in spans)
    assert names == sorted(
        [
            "invoke_agent claude-code",
            "chat claude-sonnet-4-5",
            "chat claude-sonnet-4-5",
            "chat claude-sonnet-4-5",
            "execute_tool Task",
            "invoke_agent Explore",
            "execute_tool Read",
        ]
    )
    root = spans[0]
    assert root.parent_id is None and root.kind == "INTERNAL"
    assert root.trace_id == trace_id_for("claude-code", S, "t1") and all(
        s.trace_id == root.trace_id for s in spans
    )
    assert root.span_id == root_span_id("claude-code", S, "t1")
    assert (root.start_ns, root.end_ns) == (T0, T0 + 310 * MS)
    assert root.attributes["gen_ai.conversation.id"] == S
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.provider.name"] == "anthropic"
    task = by_name(spans)["execute_tool Task"]
    sub = by_name(spans)["invoke_agent Explore"]
    read = by_name(spans)["execute_tool Read"]
    assert task.parent_id == root.span_id and task.span_id == tool_span_id("claude-code", S, "task-1")
    assert sub.parent_id == task.span_id and sub.kind == "INTERNAL"
    assert read.parent_id == sub.span_id
    assert (task.start_ns, task.end_ns) == (T0 + 110 * MS, T0 + 250 * MS)
    assert (sub.start_ns, sub.end_ns) == (T0 + 120 * MS, T0 + 240 * MS)
    assert read.status == "ERROR" and read.attributes["error.type"] == "file_not_found"
    chats = [s for s in spans if s.name.startswith("chat")]
    assert all(c.kind == "CLIENT" for c in chats)
    assert sorted((c.start_ns - T0) // MS for c in chats) == [10, 130, 260]
    sub_chat = next(c for c in chats if c.attributes["gen_ai.response.id"] == "m2")
    assert sub_chat.parent_id == sub.span_id
    # every child lies inside the root
    assert all(root.start_ns <= s.start_ns <= s.end_ns <= root.end_ns for s in spans)


def test_tokens_only_on_chat_spans() -> None:
    spans = build_spans(TurnInput("claude-code", S, "t1", turn_with_subagent()))
    with_tokens = [s for s in spans if any(k.startswith("gen_ai.usage.") for k in s.attributes)]
    assert {s.name for s in with_tokens} == {"chat claude-sonnet-4-5"}
    inputs = [s.attributes.get("gen_ai.usage.input_tokens", 0) for s in spans]
    outputs = [s.attributes.get("gen_ai.usage.output_tokens", 0) for s in spans]
    assert sum(v for v in inputs if isinstance(v, int)) == 350
    assert sum(v for v in outputs if isinstance(v, int)) == 35


def test_ids_are_deterministic_and_order_independent() -> None:
    entries = turn_with_subagent()
    a = build_spans(TurnInput("claude-code", S, "t1", entries))
    b = build_spans(TurnInput("claude-code", S, "t1", list(reversed(entries))))
    assert sorted((s.span_id, s.parent_id, s.start_ns, s.end_ns) for s in a) == sorted(
        (s.span_id, s.parent_id, s.start_ns, s.end_ns) for s in b
    )
    assert len({s.span_id for s in a}) == len(a)


def test_response_without_request_starts_at_response_minus_latency() -> None:
    entries = [
        e("user.prompt", 0, **{"gen_ai.turn.id": "t"}),
        e(
            "llm.response",
            1000,
            **{"gen_ai.response.id": "r", "duration_ms": 400, "gen_ai.request.model": "m"},
        ),
    ]
    chat = by_name(build_spans(TurnInput("claude-code", S, "t", entries)))["chat m"]
    assert (chat.start_ns, chat.end_ns) == (T0 + 600 * MS, T0 + 1000 * MS)


def test_tool_without_result_is_marked_incomplete() -> None:
    entries = [
        e("user.prompt", 0),
        e("tool.call", 10, **{"gen_ai.tool.name": "Bash", "gen_ai.tool.call.id": "c"}),
        e("session.status", 50, **{"session.status": "error"}),
    ]
    tool = by_name(build_spans(TurnInput("claude-code", S, "k", entries, complete=False)))[
        "execute_tool Bash"
    ]
    assert tool.attributes["agent_collector.incomplete"] is True and tool.end_ns == T0 + 50 * MS


def test_content_fields_follow_the_entry() -> None:
    entries = [
        e(
            "user.prompt",
            0,
            **{"gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]},
        ),
        e(
            "tool.call",
            1,
            **{
                "gen_ai.tool.name": "Bash",
                "gen_ai.tool.call.id": "c",
                "gen_ai.tool.call.arguments.length": 9,
                "gen_ai.tool.call.arguments.hmac": "ab",
            },
        ),  # noqa: E501
    ]
    spans = by_name(build_spans(TurnInput("claude-code", S, "k", entries)))
    assert '"content":"hi"' in spans["invoke_agent claude-code"].attributes["gen_ai.input.messages"]
    tool = spans["execute_tool Bash"].attributes
    assert "gen_ai.tool.call.arguments" not in tool and tool["gen_ai.tool.call.arguments.length"] == 9


def test_error_entry_becomes_event_and_error_status() -> None:
    entries = [e("user.prompt", 0), e("error", 5, **{"error.type": "rate_limit"})]
    root = build_spans(TurnInput("claude-code", S, "k", entries))[0]
    assert root.status == "ERROR" and root.attributes["error.type"] == "rate_limit"
    assert [ev.name for ev in root.events] == ["error"]


# -- turn grouping -------------------------------------------------------------------------------------------
def test_turns_end_at_next_prompt_status_and_session_end() -> None:
    asm = TurnAssembler(idle_ns=10**12)
    for entry in [e("session.start", 0), e("user.prompt", 1), *llm(2, 3, "a", 1, 1), e("user.prompt", 4)]:
        asm.add(entry, now_ns=0)
    first = asm.due(0)
    assert len(first) == 1 and first[0].complete and len(first[0].entries) == 3
    asm.add(e("session.status", 5, **{"session.status": "ready_for_review"}), 0)
    second = asm.due(0)
    assert len(second) == 1 and second[0].key == "user.prompt-4-"
    assert asm.open_turns == 0


def test_idle_turn_is_released_incomplete() -> None:
    asm = TurnAssembler(idle_ns=1000)
    asm.add(e("user.prompt", 0), now_ns=0)
    assert asm.due(999) == []
    released = asm.due(1000)
    assert len(released) == 1 and not released[0].complete


def test_grace_keeps_an_ended_turn_open_for_stragglers() -> None:
    asm = TurnAssembler(idle_ns=10**12, grace_ns=500)
    asm.add(e("user.prompt", 0), 0)
    asm.add(e("session.end", 1), 0)
    asm.add(llm(2, 3, "x", 1, 1)[1], 100)  # a transcript line read after the hook
    assert asm.due(400) == []
    (turn,) = asm.due(600)
    assert [x["event.name"] for x in turn.entries] == ["user.prompt", "session.end", "llm.response"]


def test_late_entries_and_duplicates_after_release() -> None:
    asm = TurnAssembler(idle_ns=10**12)
    prompt = e("user.prompt", 0, **{"gen_ai.turn.id": "T"})
    asm.add(prompt, 0)
    asm.add(e("session.end", 1), 0)
    (turn,) = asm.due(0)
    asm.record_sent(turn, ["root"])
    asm.add(prompt, 0)  # replayed
    late = llm(2, 3, "x", 1, 1, **{"gen_ai.turn.id": "T"})
    for entry in late:
        asm.add(entry, 0)
    (unit,) = asm.due(0)
    assert not unit.include_root and len(unit.entries) == 2
    assert asm.duplicates == 1


def test_state_survives_a_round_trip() -> None:
    asm = TurnAssembler(idle_ns=1000)
    asm.add(e("user.prompt", 0), 0)
    asm.add(llm(1, 2, "x", 1, 1)[0], 5)
    again = TurnAssembler(idle_ns=1000)
    again.load_json(asm.to_json())
    again.add(llm(1, 2, "x", 1, 1)[0], 6)  # duplicate after restart
    assert again.duplicates == 1
    (turn,) = again.due(2000)
    assert len(turn.entries) == 2


UPSTREAM = {"upstream__trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "upstream__parent_span_id": "00f067aa0ba902b7"}


def linked(entries: list[dict[str, Any]], **fields: Any) -> list[dict[str, Any]]:
    return [{**x, **{k.replace("__", "."): v for k, v in fields.items()}} for x in entries]


def test_an_upstream_span_makes_the_turn_its_remote_child_in_its_trace() -> None:
    spans = build_spans(TurnInput("claude-code", S, "t1", linked(turn_with_subagent(), **UPSTREAM)))
    root, others = spans[0], spans[1:]
    assert root.trace_id == int(UPSTREAM["upstream__trace_id"], 16)
    assert root.parent_id == int(UPSTREAM["upstream__parent_span_id"], 16) and root.parent_remote
    assert all(s.trace_id == root.trace_id and not s.parent_remote for s in others)
    assert root.span_id == root_span_id("claude-code", S, "t1"), "span ids stay the turn's own"
    assert SpanData.from_json(root.to_json()) == root, "the outbox keeps the link"
    late = build_spans(TurnInput("claude-code", S, "t1", linked(turn_with_subagent()[-2:], **UPSTREAM),
                                 include_root=False))
    assert late and all(s.trace_id == root.trace_id for s in late), "late entries go to the same trace"


def test_an_unusable_upstream_is_no_link() -> None:
    plain = build_spans(TurnInput("claude-code", S, "t1", turn_with_subagent()))[0]
    assert not plain.parent_remote and "parent_remote" not in plain.to_json()
    bad = [
        {"upstream__trace_id": "0" * 32, "upstream__parent_span_id": "00f067aa0ba902b7"},
        {"upstream__trace_id": "4BF92F3577B34DA6A3CE929D0E0E4736", "upstream__parent_span_id": "00f067aa0ba902b7"},
        {"upstream__trace_id": "0x" + "1" * 30, "upstream__parent_span_id": "00f067aa0ba902b7"},
        {"upstream__trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"},
        {"upstream__trace_id": 5, "upstream__parent_span_id": 6},
    ]
    for fields in bad:
        root = build_spans(TurnInput("claude-code", S, "t1", linked(turn_with_subagent(), **fields)))[0]
        assert (root.trace_id, root.parent_id, root.parent_remote) == (plain.trace_id, None, False), fields


def test_the_custom_attributes_an_entry_names_are_on_every_span() -> None:
    entries = turn_with_subagent()
    for entry in entries[3:]:  # the first entries were stamped before the run's context was known
        entry.update({"team": "a", "ticket": "T-1", "gen_ai.x": "not named", "collector.custom_attributes": ["team",
                      "ticket", "missing"]})
    spans = build_spans(TurnInput("claude-code", S, "t1", entries))
    assert all(s.attributes["team"] == "a" and s.attributes["ticket"] == "T-1" for s in spans)
    assert not any("gen_ai.x" in s.attributes or "missing" in s.attributes for s in spans)
    assert by_name(spans)["execute_tool Task"].attributes["gen_ai.operation.name"] == "execute_tool"
