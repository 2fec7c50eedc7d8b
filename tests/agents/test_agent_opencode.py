"""OpenCode parser on real captures (tests/fixtures/opencode/*): plugin spool lines and database rows."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.agents import by_name, run_pipeline

from collector.agents import opencode
from collector.definitions import load_definitions
from collector.model import RawRecord
from collector.sources.sqlite_rows import SqliteRows
from collector.sources.sqlite_specs import table_specs

CASES = Path(__file__).parent.parent / "fixtures" / "opencode"
AGENT = "opencode"
# The tables as agents.d/opencode.json reads them (a user message row comes with its text parts).
(DB_SOURCE,) = [s for s in load_definitions(None).agents[AGENT].raw["sources"] if s["kind"] == "sqlite"]
TABLES = table_specs(DB_SOURCE["tables"])


def spool(case: str) -> list[RawRecord]:
    out = []
    for path in sorted((CASES / case / "spool").rglob("*.jsonl")):
        for number, line in enumerate(path.read_text().splitlines()):
            out.append(RawRecord(AGENT, "hook", json.loads(line), "fp", str(number), 1, {"path": str(path)}))
    return out


def rows(case: str, tmp: Path) -> list[RawRecord]:
    """The fixture's database read by the real sqlite source (from a copy: readers may create -shm)."""
    shutil.copytree(CASES / case / "home", tmp / case)
    source = SqliteRows("t", AGENT, str(tmp / case / ".local/share/opencode/opencode.db"), TABLES, {})

    async def read() -> list[RawRecord]:
        return [record async for record, _ in source.read() if record is not None]

    return asyncio.run(read())


def run(*batches: list[RawRecord]) -> list[dict[str, Any]]:
    return run_pipeline("opencode", opencode.parse, batches)


def tokens(entries: list[dict[str, Any]]) -> Counter[tuple[int, int, int]]:
    return Counter(
        (
            e["gen_ai.usage.input_tokens"],
            e["gen_ai.usage.output_tokens"],
            e["gen_ai.usage.cache_read.input_tokens"],
        )
        for e in by_name(entries, "llm.response")
    )


def truth(path: Path) -> Counter[tuple[int, int, int]]:
    lines = [json.loads(x)["usage"] for x in path.read_text().splitlines() if x.strip()]
    return Counter(
        (u["prompt_tokens"], u["completion_tokens"], u["prompt_tokens_details"]["cached_tokens"])
        for u in lines
    )


@pytest.mark.parametrize("case", ["tool_then_answer", "two_turns_resume", "failing_command"])
def test_every_model_call_but_the_title_call_has_exact_tokens(case: str, tmp_path: Path) -> None:
    """The server's usage records, split: response_usage.jsonl (what OpenCode stores) and
    response_usage_title.jsonl (the title call, whose usage OpenCode keeps nowhere)."""
    from_db = run(rows(case, tmp_path))
    from_spool = run(spool(case))
    exposed, title = (
        truth(CASES / case / "response_usage.jsonl"),
        truth(CASES / case / "response_usage_title.jsonl"),
    )
    assert sum(title.values()) == 1
    assert tokens(from_db) == tokens(from_spool) == exposed
    assert not set(title) & set(tokens(from_db))


def test_database_and_plugin_events_give_the_same_ids(tmp_path: Path) -> None:
    from_db = {(e["event.name"], e["event.id"]) for e in run(rows("two_turns_resume", tmp_path))}
    from_spool = {(e["event.name"], e["event.id"]) for e in run(spool("two_turns_resume"))}
    assert from_db == from_spool
    both = run(rows("two_turns_resume", tmp_path / "again"), spool("two_turns_resume"))
    assert len(both) == len(from_spool)  # every fact once, whichever input told it


def test_wal_only_database_is_read(tmp_path: Path) -> None:
    db = CASES / "tool_then_answer" / "home/.local/share/opencode"
    assert (db / "opencode.db").stat().st_size == 4096 and (db / "opencode.db-wal").stat().st_size > 100_000
    entries = run(rows("tool_then_answer", tmp_path))
    assert Counter(e["event.name"] for e in entries) == {
        "session.start": 1,
        "user.prompt": 1,
        "llm.response": 2,
        "tool.call": 1,
        "tool.result": 1,
    }


def test_failed_shell_command_and_throwing_tool(tmp_path: Path) -> None:
    (result,) = by_name(run(rows("failing_command", tmp_path)), "tool.result")
    assert result["tool.result.status"] == "error" and result["process.exit.code"] == 1

    # A throwing tool (read of a missing file): no tool.execute.after, only the part row with status error.
    part = {
        "type": "tool",
        "tool": "read",
        "callID": "call_x",
        "state": {
            "status": "error",
            "input": {"filePath": "/missing"},
            "error": "File not found: /missing",
            "time": {"start": 1000, "end": 1250},
        },
    }
    row = {
        "id": "prt_1",
        "message_id": "msg_1",
        "session_id": "ses_1",
        "time_updated": 1,
        "data": json.dumps(part),
    }
    entries = run([RawRecord(AGENT, "sqlite", {"table": "part", "row": row}, "db:part", "1:prt_1", 1)])
    assert [e["event.name"] for e in entries] == ["tool.call", "tool.result"]
    assert (
        entries[1]["tool.result.status"] == "error"
        and entries[1]["error.message"] == "File not found: /missing"
    )
    assert entries[1]["duration_ms"] == 250


def message_row(data: dict[str, Any], updated: int) -> RawRecord:
    row = {
        "id": "msg_a",
        "session_id": "ses_1",
        "time_created": 1,
        "time_updated": updated,
        "data": json.dumps(data),
    }
    return RawRecord(AGENT, "sqlite", {"table": "message", "row": row}, "db:message", f"{updated}:msg_a", 1)


def test_a_row_counts_only_once_it_is_final_and_only_once() -> None:
    streaming = {
        "role": "assistant",
        "parentID": "msg_u",
        "modelID": "m",
        "providerID": "p",
        "time": {"created": 1000},
        "tokens": {"input": 0, "output": 0, "cache": {"read": 0, "write": 0}},
    }
    done = {
        **streaming,
        "time": {"created": 1000, "completed": 1900},
        "finish": "stop",
        "tokens": {"input": 70, "output": 9, "reasoning": 3, "cache": {"read": 30, "write": 5}},
    }
    entries = run([message_row(streaming, 2)], [message_row(done, 3)], [message_row(done, 4)])
    (response,) = entries
    assert (
        response["gen_ai.usage.input_tokens"],
        response["gen_ai.usage.output_tokens"],
        response["gen_ai.usage.cache_read.input_tokens"],
        response["gen_ai.usage.cache_creation.input_tokens"],
        response["gen_ai.usage.reasoning_tokens"],
    ) == (105, 12, 30, 5, 3)
    assert response["duration_ms"] == 900 and response["gen_ai.turn.id"] == "msg_u"
    assert response["gen_ai.response.finish_reasons"] == ["stop"]


def test_chat_message_and_the_database_give_the_same_prompt_text(tmp_path: Path) -> None:
    """The plugin's chat.message has the text; the database's user message row, read with its text parts
    (which alone do not say whose they are), gives the same entry with the same text."""
    (prompt,) = by_name(run(spool("tool_then_answer")), "user.prompt")
    assert "echo hi" in prompt["gen_ai.input.messages"][0]["parts"][0]["content"]
    (db_prompt,) = by_name(run(rows("tool_then_answer", tmp_path)), "user.prompt")
    assert db_prompt["event.id"] == prompt["event.id"]
    assert db_prompt["gen_ai.input.messages"] == prompt["gen_ai.input.messages"]


def _user_row(parts: list[dict[str, Any]] | None, text_parts: str | None = None) -> RawRecord:
    data = {"role": "user", "time": {"created": 5}, "summary": {"diffs": [{"file": "a.env", "patch": "+K=v"}]}}
    row: dict[str, Any] = {"id": "msg_u", "session_id": "ses_1", "time_created": 5, "time_updated": 9,
                           "data": json.dumps(data)}
    if parts is not None:
        text_parts = json.dumps([json.dumps(p) for p in parts])  # as the source gives it: JSON of JSON texts
    if text_parts is not None:
        row["text_parts"] = text_parts
    return RawRecord(AGENT, "sqlite", {"table": "message", "row": row}, "db:message", "9:msg_u", 1)


def test_a_user_row_gives_its_typed_text_and_nothing_of_its_summary() -> None:
    typed = {"type": "text", "text": "fix the build"}
    added = {"type": "text", "text": "Called the Read tool", "synthetic": True}
    (entry,) = opencode.parse(_user_row([typed, added, {"type": "text", "text": "and test it"}]))
    assert entry.attributes["gen_ai.input.messages"] == [
        {"role": "user", "parts": [{"type": "text", "content": "fix the build\nand test it"}]}]
    assert "a.env" not in json.dumps(entry.attributes) and "K=v" not in json.dumps(entry.attributes)
    for bare in (_user_row(None), _user_row([]), _user_row(None, '["{not json"]'), _user_row(None, "{oops")):
        (prompt,) = opencode.parse(bare)  # no parts read (or none written yet), or unreadable ones: no text
        assert prompt.id == entry.id and "gen_ai.input.messages" not in prompt.attributes


def test_older_capture_event_names_are_understood() -> None:
    """Early captures named bus events ``event:<type>`` and wrapped them as ``{input: event}``."""
    line = next(r for r in spool("tool_then_answer") if r.data["event"] == "session.created")
    old = RawRecord(
        AGENT,
        "hook",
        {
            **line.data,
            "event": "event:session.created",
            "payload": {"input": line.data["payload"], "output": None},
        },
        "f",
        "0",
        1,
    )
    assert [e.id for e in opencode.parse(old)] == [e.id for e in opencode.parse(line)]


def test_a_second_pass_writes_nothing_twice(tmp_path: Path) -> None:
    """A restart over the same files and spool (hooks and agent files both read again) adds nothing."""
    from support import assert_no_duplicates, collect, prepare_fixture

    paths = prepare_fixture(Path(__file__).parent.parent / "fixtures" / "opencode" / "two_turns_resume", tmp_path)
    first = collect(paths)
    second = collect(paths)
    assert len(first) == len(second) > 0
    assert_no_duplicates(second)
