"""Codex CLI parser: which source wins for what, on real captures (tests/fixtures/codex/*)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.agents import by_name, fixture_records, run_pipeline

from collector.agents import codex
from collector.model import RawRecord

CASES = Path(__file__).parent.parent / "fixtures" / "codex"


def records(case: str, kind: str) -> list[RawRecord]:
    return fixture_records("codex", case, kind)


def run(batches: list[list[RawRecord]]) -> list[dict[str, Any]]:
    return run_pipeline("codex", codex.parse, batches)


@pytest.mark.parametrize("order", ["hooks_first", "rollout_first"])
def test_a_failed_command_is_an_error_whichever_source_is_read_first(order: str) -> None:
    hooks, rollout = records("failing_command", "hook"), records("failing_command", "transcript")
    entries = run([hooks, rollout] if order == "hooks_first" else [rollout, hooks])
    (call,) = by_name(entries, "tool.call")
    (result,) = by_name(entries, "tool.result")
    assert call["gen_ai.tool.name"] == result["gen_ai.tool.name"] == "exec_command"
    assert result["tool.result.status"] == "error" and result["process.exit.code"] == 1
    assert "No such file" in result["error.message"]
    assert len(by_name(entries, "user.prompt")) == 1


def test_the_posttooluse_hook_alone_claims_nothing_about_success() -> None:
    """PostToolUse fires for exit 1 as for exit 0: with a rollout named, the hook makes no result."""
    post = [r for r in records("failing_command", "hook") if r.data["event"] == "PostToolUse"]
    assert post and all(codex.parse(r) == [] for r in post)


def test_hooks_without_a_rollout_still_report_the_tool() -> None:
    """``codex exec --ephemeral`` writes no rollout: the tool hooks are all there is."""
    base = {
        "session_id": "s1",
        "turn_id": "t1",
        "transcript_path": None,
        "tool_name": "Bash",
        "tool_input": {"command": "false"},
        "tool_use_id": "call_1",
        "cwd": "/w",
    }
    pre = RawRecord("codex", "hook", {"ts": 1.0, "event": "PreToolUse", "payload": base}, "f", "0", 1)
    post_payload = {**base, "tool_response": "boom"}
    post = RawRecord(
        "codex", "hook", {"ts": 2.0, "event": "PostToolUse", "payload": post_payload}, "f", "1", 1
    )
    entries = run([[pre, post]])
    assert [e["event.name"] for e in entries] == ["tool.call", "tool.result"]
    assert entries[1]["tool.result.status"] == "unknown"  # the hook cannot know the exit code
    assert entries[1]["duration_ms"] == 1000


def test_one_llm_response_per_model_response() -> None:
    """0.169 writes token_usage_record and token_count for each response: counted once, the record
    with the response id kept."""
    rollout = records("two_turns_resume", "transcript")
    kinds = Counter(
        r.data["type"] if r.data["type"] != "event_msg" else r.data["payload"]["type"] for r in rollout
    )
    assert kinds["token_usage_record"] == 4 and kinds["token_count"] == 4
    responses = by_name(run([rollout]), "llm.response")
    assert len(responses) == 4
    assert all(e["gen_ai.response.id"].startswith("resp_") for e in responses)
    truth = [
        json.loads(line)
        for line in (CASES / "two_turns_resume" / "response_usage.jsonl").read_text().splitlines()
    ]
    assert sorted(e["gen_ai.response.id"] for e in responses) == sorted(t["response_id"] for t in truth)


def test_legacy_rollout_repeated_token_count_is_one_response() -> None:
    rollout = records("legacy_rollout", "transcript")
    counts = [
        r
        for r in rollout
        if r.data["type"] == "event_msg"
        and r.data["payload"]["type"] == "token_count"
        and r.data["payload"]["info"]
    ]
    assert len(counts) == 5  # four responses, one of them reported twice
    entries = run([rollout])
    assert [e["gen_ai.usage.output_tokens"] for e in by_name(entries, "llm.response")] == [50, 80, 120, 30]
    shell = next(
        e for e in by_name(entries, "tool.result") if e["gen_ai.tool.call.id"] == "call_legacy_shell"
    )
    assert shell["tool.result.status"] == "error" and shell["gen_ai.tool.name"] == "shell"
    prompts = by_name(entries, "user.prompt")
    assert [p["gen_ai.input.messages"][0]["parts"][0]["content"] for p in prompts] == [
        "Run `false` and tell me what happened.",
        "Add a NOTES.md file.",
    ]


def test_rollout_lines_get_the_thread_id_from_the_file_name() -> None:
    entries = run([records("tool_then_answer", "transcript")])
    assert {e["gen_ai.session.id"] for e in entries} == {"01a22c23-aa3c-77d2-9efd-1ad5321cbbe2"}


def test_prompt_from_hook_and_rollout_is_one_entry() -> None:
    hooks, rollout = records("tool_then_answer", "hook"), records("tool_then_answer", "transcript")
    alone = [by_name(run([part]), "user.prompt") for part in (hooks, rollout)]
    assert alone[0][0]["event.id"] == alone[1][0]["event.id"]
    assert len(by_name(run([rollout, hooks]), "user.prompt")) == 1


def test_each_process_of_a_resumed_thread_starts_and_ends_once() -> None:
    """Both SessionEnd hooks carry byte-identical payloads; they are still two ends."""
    entries = run([records("two_turns_resume", "hook"), records("two_turns_resume", "transcript")])
    starts = by_name(entries, "session.start")
    assert sorted(e["session.source"] for e in starts) == ["resume", "startup"]
    assert len(by_name(entries, "session.end")) == 2


def test_notify_and_stop_make_no_entries() -> None:
    hooks = [r for r in records("tool_then_answer", "hook") if r.data["event"] in ("notify", "Stop")]
    assert len(hooks) == 2 and all(codex.parse(r) == [] for r in hooks)


def test_a_second_pass_writes_nothing_twice(tmp_path: Path) -> None:
    """A restart over the same files and spool (hooks and agent files both read again) adds nothing."""
    from support import assert_no_duplicates, collect, prepare_fixture

    paths = prepare_fixture(Path(__file__).parent.parent / "fixtures" / "codex" / "two_turns_resume", tmp_path)
    first = collect(paths)
    second = collect(paths)
    assert len(first) == len(second) > 0
    assert_no_duplicates(second)
