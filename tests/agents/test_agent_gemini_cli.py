"""Gemini CLI parser on real captures (tests/fixtures/gemini-cli/*) and on the older whole-file format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.agents import by_name, fixture_records, run_pipeline

from collector.agents import gemini_cli
from collector.model import RawRecord

CASES = Path(__file__).parent.parent / "fixtures" / "gemini-cli"
AGENT = "gemini-cli"


def records(case: str, kind: str) -> list[RawRecord]:
    return fixture_records("gemini-cli", case, kind)


def run(*batches: list[RawRecord]) -> list[dict[str, Any]]:
    return run_pipeline("gemini-cli", gemini_cli.parse, batches)


def test_exit_code_1_reported_as_success_by_gemini_is_an_error() -> None:
    chat = records("failing_command", "transcript")
    calls = [c for r in chat for c in r.data.get("toolCalls") or []]
    assert calls and {c["status"] for c in calls} == {"success"}  # what Gemini itself says
    (result,) = by_name(run(records("failing_command", "hook"), chat), "tool.result")
    assert result["tool.result.status"] == "error" and result["process.exit.code"] == 1
    assert result["gen_ai.tool.name"] == "run_shell_command"


def test_a_message_written_twice_counts_once() -> None:
    chat = records("tool_then_answer", "transcript")
    ids = [r.data["id"] for r in chat if r.data.get("type") == "gemini"]
    assert len(ids) == 3 and len(set(ids)) == 2  # the tool-calling message is written again with its calls
    entries = run(chat)
    assert len(by_name(entries, "llm.response")) == 2
    assert len(by_name(entries, "tool.call")) == len(by_name(entries, "tool.result")) == 1


def test_precompress_never_becomes_a_compaction() -> None:
    hooks = records("two_turns_resume", "hook")
    assert sum(r.data["event"] == "PreCompress" for r in hooks) == 4  # one before each model call
    assert not by_name(run(hooks, records("two_turns_resume", "transcript")), "compaction")


def test_hooks_naming_a_chat_log_leave_prompts_models_and_tools_to_it() -> None:
    entries = run(records("tool_then_answer", "hook"))
    assert sorted(e["event.name"] for e in entries if e["event.name"] != "session.status") == [
        "session.end",
        "session.start",
    ]


def test_hooks_without_a_chat_log_are_the_fallback() -> None:
    hooks = []
    for r in records("failing_command", "hook"):
        payload = {**r.data["payload"], "transcript_path": ""}
        hooks.append(RawRecord(AGENT, "hook", {**r.data, "payload": payload}, r.source_id, r.position, 1))
    entries = run(hooks)
    assert len(by_name(entries, "user.prompt")) == 1
    (call,), (result,) = by_name(entries, "tool.call"), by_name(entries, "tool.result")
    assert call["gen_ai.tool.call.id"] == result["gen_ai.tool.call.id"]
    assert result["tool.result.status"] == "error"  # AfterTool's llmContent holds "Exit Code: 1"
    truth = [
        json.loads(x)["usage"]
        for x in (CASES / "failing_command" / "response_usage.jsonl").read_text().splitlines()
    ]
    assert [e["gen_ai.usage.input_tokens"] for e in by_name(entries, "llm.response")] == [
        u["promptTokenCount"] for u in truth
    ]


def test_message_lines_take_the_session_id_from_the_header() -> None:
    chat = records("two_turns_resume", "transcript")
    assert not any("sessionId" in r.data for r in chat if r.data.get("type"))
    assert {e["gen_ai.session.id"] for e in run(chat)} == {"c838caee-a148-4f4d-a95d-f816a7716305"}


def test_resume_replay_in_set_patches_is_not_reported_again() -> None:
    entries = run(records("two_turns_resume", "transcript"))
    assert len(by_name(entries, "user.prompt")) == 2 and len(by_name(entries, "llm.response")) == 4


def message(kind: str, msg_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": msg_id, "timestamp": "2025-06-01T10:00:00.000Z", "type": kind, **extra}


def test_older_whole_file_checkpoint_document() -> None:
    doc = {
        "sessionId": "sess-1",
        "projectHash": "abc",
        "startTime": "2025-06-01T10:00:00.000Z",
        "messages": [
            message("user", "u1", content=[{"text": "hello"}]),
            message(
                "gemini",
                "g1",
                content="",
                model="gemini-2.5-pro",
                tokens={"input": 100, "output": 10, "cached": 40, "thoughts": 5, "tool": 0, "total": 115},
                toolCalls=[
                    {
                        "id": "c1",
                        "name": "read_file",
                        "args": {"file_path": "/x"},
                        "status": "error",
                        "timestamp": "2025-06-01T10:00:01.000Z",
                        "result": [
                            {
                                "functionResponse": {
                                    "id": "c1",
                                    "name": "read_file",
                                    "response": {"error": "File not found: /x"},
                                }
                            }
                        ],
                    },
                    {"id": "c2", "name": "run_shell_command", "args": {}, "status": "executing"},
                ],
            ),
            message("info", "i1", content="Request cancelled."),
        ],
    }
    entries = run([RawRecord(AGENT, "json_file", doc, "/p", "hash", 1, {"path": "/p"})])
    assert [e["event.name"] for e in entries] == [
        "user.prompt",
        "llm.response",
        "tool.call",
        "tool.result",
        "tool.call",
    ]
    response = entries[1]
    assert (
        response["gen_ai.usage.input_tokens"],
        response["gen_ai.usage.output_tokens"],
        response["gen_ai.usage.cache_read.input_tokens"],
        response["gen_ai.usage.reasoning_tokens"],
    ) == (100, 15, 40, 5)  # thoughts are output
    assert entries[3]["tool.result.status"] == "error" and entries[3]["error.message"] == "File not found: /x"
    assert all(e["gen_ai.session.id"] == "sess-1" for e in entries)


@pytest.mark.parametrize(
    ("status", "output", "want"),
    [
        ("success", "Output: hi\nProcess Group PGID: 1", "success"),
        ("success", "Output: \nExit Code: 2\n", "error"),
        ("cancelled", None, "cancelled"),
    ],
)
def test_tool_status(status: str, output: str | None, want: str) -> None:
    call = {
        "id": "c",
        "name": "run_shell_command",
        "status": status,
        "result": [{"functionResponse": {"id": "c", "response": {"output": output}}}],
    }
    entries = gemini_cli.parse(
        RawRecord(
            AGENT,
            "transcript",
            message("gemini", "m", toolCalls=[call]),
            "f",
            "0",
            1,
            {"path": "/nonexistent"},
        )
    )
    assert [e.attributes["tool.result.status"] for e in entries if e.name == "tool.result"] == [want]


def test_a_second_pass_writes_nothing_twice(tmp_path: Path) -> None:
    """A restart over the same files and spool (hooks and agent files both read again) adds nothing."""
    from support import assert_no_duplicates, collect, prepare_fixture

    paths = prepare_fixture(Path(__file__).parent.parent / "fixtures" / "gemini-cli" / "two_turns_resume", tmp_path)
    first = collect(paths)
    second = collect(paths)
    assert len(first) == len(second) > 0
    assert_no_duplicates(second)
