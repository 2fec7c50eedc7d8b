"""Qwen Code parser on real captures (tests/fixtures/qwen-code/*)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.agents import by_name, fixture_records, run_pipeline

from collector.agents import qwen_code
from collector.model import RawRecord

CASES = Path(__file__).parent.parent / "fixtures" / "qwen-code"
AGENT = "qwen-code"


def records(case: str, kind: str) -> list[RawRecord]:
    return fixture_records("qwen-code", case, kind)


def run(*batches: list[RawRecord]) -> list[dict[str, Any]]:
    return run_pipeline("qwen-code", qwen_code.parse, batches)


def test_one_prompt_per_turn_although_the_hook_fires_twice() -> None:
    hooks = records("two_turns_resume", "hook")
    submits = [r.data["payload"] for r in hooks if r.data["event"] == "UserPromptSubmit"]
    assert len(submits) == 4 and sum(1 for p in submits if p["prompt"] == "") == 2
    prompts = by_name(run(hooks), "user.prompt")
    assert [p["gen_ai.turn.id"].rsplit("#", 1)[1] for p in prompts] == ["0", "2"]
    assert all(p["gen_ai.input.messages"][0]["parts"][0]["content"] for p in prompts)


@pytest.mark.parametrize("order", ["hooks_first", "chat_first"])
def test_failed_command_from_hook_and_chat_is_one_error(order: str) -> None:
    hooks, chat = records("failing_command", "hook"), records("failing_command", "transcript")
    entries = run(*([hooks, chat] if order == "hooks_first" else [chat, hooks]))
    (call,), (result,) = by_name(entries, "tool.call"), by_name(entries, "tool.result")
    assert call["gen_ai.tool.call.id"] == result["gen_ai.tool.call.id"] and call[
        "gen_ai.tool.call.id"
    ].startswith("call_")
    assert result["tool.result.status"] == "error"
    assert result["gen_ai.tool.name"] == "run_shell_command"


def test_chat_alone_gives_the_same_tool_status_as_the_hook() -> None:
    hook_result = by_name(run(records("failing_command", "hook")), "tool.result")
    chat_result = by_name(run(records("failing_command", "transcript")), "tool.result")
    assert [e["event.id"] for e in hook_result] == [e["event.id"] for e in chat_result]
    assert hook_result[0]["tool.result.status"] == chat_result[0]["tool.result.status"] == "error"
    assert chat_result[0]["process.exit.code"] == 1


def test_model_calls_come_from_api_response_telemetry_only() -> None:
    chat = records("tool_then_answer", "transcript")
    assistants = [r for r in chat if r.data["type"] == "assistant"]
    assert assistants and all(
        "usageMetadata" in r.data for r in assistants
    )  # the same tokens, no response id
    responses = by_name(run(chat), "llm.response")
    truth = [
        json.loads(x) for x in (CASES / "tool_then_answer" / "response_usage.jsonl").read_text().splitlines()
    ]
    assert [e["gen_ai.response.id"] for e in responses] == [t["response_id"] for t in truth]
    assert [e["gen_ai.usage.input_tokens"] for e in responses] == [t["usage"]["prompt_tokens"] for t in truth]
    assert all(e["duration_ms"] >= 0 and e["gen_ai.turn.id"].endswith("########0") for e in responses)


def test_the_hook_only_tool_use_id_is_not_the_call_id() -> None:
    pre = next(r for r in records("tool_then_answer", "hook") if r.data["event"] == "PreToolUse")
    assert pre.data["payload"]["tool_use_id"] != pre.data["payload"]["tool_call_id"]
    (entry,) = qwen_code.parse(pre)
    assert entry.attributes["gen_ai.tool.call.id"] == pre.data["payload"]["tool_call_id"]


def test_no_session_end_is_invented() -> None:
    entries = run(records("two_turns_resume", "hook"), records("two_turns_resume", "transcript"))
    assert not by_name(entries, "session.end")
    assert len(by_name(entries, "session.start")) == 2


def test_a_second_pass_writes_nothing_twice(tmp_path: Path) -> None:
    """A restart over the same files and spool (hooks and agent files both read again) adds nothing."""
    from support import assert_no_duplicates, collect, prepare_fixture

    paths = prepare_fixture(Path(__file__).parent.parent / "fixtures" / "qwen-code" / "two_turns_resume", tmp_path)
    first = collect(paths)
    second = collect(paths)
    assert len(first) == len(second) > 0
    assert_no_duplicates(second)


@pytest.mark.parametrize("case", ["tool_then_answer", "two_turns_resume", "failing_command"])
def test_chat_log_alone_gives_the_hooks_prompts(case: str) -> None:
    """The chat log's user record has no prompt id; the telemetry after it has, and the prompt it makes
    has the hook's event id, turn id and text, so hook + chat log collapse into one entry."""
    hooks = {e["event.id"]: e for e in by_name(run(records(case, "hook")), "user.prompt")}
    chat = by_name(run(records(case, "transcript")), "user.prompt")
    assert chat and {e["event.id"] for e in chat} == set(hooks)
    for prompt in chat:
        hook = hooks[prompt["event.id"]]
        assert prompt["gen_ai.turn.id"] == hook["gen_ai.turn.id"]
        assert prompt["gen_ai.input.messages"] == hook["gen_ai.input.messages"]
    both = by_name(run(records(case, "transcript"), records(case, "hook")), "user.prompt")
    assert len(both) == len(hooks)


def test_only_the_first_telemetry_of_a_turn_reports_its_prompt() -> None:
    chat = records("two_turns_resume", "transcript")
    telemetry = [r for r in chat if r.data.get("subtype") == "ui_telemetry"]
    made = [[e.name for e in qwen_code.parse(r)] for r in telemetry]
    assert [names.count("user.prompt") for names in made] == [1, 0, 0, 1, 0, 0]
