"""pi's parser (pi and Oh My Pi) on wrong-typed fields it dispatches on: each record it must leave out, in
whole or in part, is counted (`pipeline.unreadable`), never dropped unseen (issue 34, found by the sweep:
an Oh My Pi assistant message whose tool-call part is a number lost its tool.call with no count)."""

from __future__ import annotations

from typing import Any

import pytest
from support.agents import fixture_records

from collector.agents import pi
from collector.definitions import load_definitions
from collector.model import RawRecord
from collector.model.entry import UNREADABLE
from collector.pipeline.field_types import FieldTypes

META = {"path": "/h/.pi/agent/sessions/--w--/2026-12-01T00-00-00-000Z_01a233bc-3f58-7000-801b-df7edb8d34ca.jsonl"}


def _assistant(**changes: Any) -> dict[str, Any]:
    """The assistant line of pi's real tool_then_answer run, with ``changes`` to its message."""
    line = next(r.data for r in fixture_records("pi", "tool_then_answer", "transcript")
                if r.data.get("type") == "message" and r.data["message"].get("role") == "assistant"
                and any(p.get("type") == "toolCall" for p in r.data["message"]["content"]))
    return {**line, "message": {**line["message"], **changes}}


def _parsed(data: dict[str, Any], kind: str = "transcript") -> tuple[list[str], list[str]]:
    """(names of the entries made, reasons counted) for one record, the declared types checked first as
    the pipeline does."""
    record = RawRecord("pi", kind, data, "fp", "0", 1, META)
    declared = FieldTypes.of_sources(load_definitions().agents["pi"].sources).problems(record)
    made = [] if declared else pi.parse(record)
    return ([e.name for e in made if e.name != UNREADABLE],
            declared + [e.attributes["reason"] for e in made if e.name == UNREADABLE])


def test_the_real_assistant_line_makes_a_response_and_a_tool_call_and_counts_nothing() -> None:
    names, reasons = _parsed(_assistant())
    assert names == ["llm.response", "tool.call"] and reasons == []


@pytest.mark.parametrize(("content", "reason"), [
    ([1.5], "assistant message content[] is a number, not an object"),
    (7, "assistant message content is a number, not a list"),
    ("x" * 100, "assistant message content is a string, not a list"),  # sweep seed 49: pi writes parts only
])
def test_a_content_that_may_have_held_a_tool_call_is_counted_and_the_response_kept(content: Any, reason: str) -> None:
    names, reasons = _parsed(_assistant(content=content))
    assert names == ["llm.response"] and reasons == [reason]


def test_a_tool_call_part_with_a_wrong_typed_id_is_counted() -> None:
    (part,) = [p for p in _assistant()["message"]["content"] if p.get("type") == "toolCall"]
    names, reasons = _parsed(_assistant(content=[{**part, "id": True}]))
    assert names == ["llm.response"] and reasons == ["assistant message content[] id is a boolean, not a string"]


@pytest.mark.parametrize(("data", "reason"), [
    ({"type": "session", "id": 5}, "session header id is a number, not a string"),
    ({"type": "compaction", "id": ["x"]}, "compaction id is a list, not a string"),
    ({"type": "message", "message": {"role": "user", "timestamp": "soon", "content": "hi"}},
     "user message timestamp is a string, not an integer"),
    ({"type": "message", "message": {"role": "user", "timestamp": 1.5, "content": "hi"}},
     "user message timestamp is a number, not an integer"),
    ({"type": "message", "message": {"role": "toolResult", "toolCallId": 3}},
     "tool result toolCallId is a number, not a string"),
    ({"type": "message", "message": {"role": ["user"]}}, "message.role is a list, not a string"),
    ({"type": {"x": 1}}, "type is an object, not a string"),
])
def test_a_session_line_it_must_leave_out_is_counted(data: dict[str, Any], reason: str) -> None:
    assert _parsed(data) == ([], [reason])


@pytest.mark.parametrize("event", ["tool_call", "tool_result"])
def test_an_extension_line_with_a_wrong_typed_tool_call_id_is_counted(event: str) -> None:
    line = {"ts": 1.0, "agent": "pi", "event": event, "payload": {"session_id": "s", "toolCallId": 12}}
    assert _parsed(line, "hook") == ([], [f"{event} toolCallId is a number, not a string"])
