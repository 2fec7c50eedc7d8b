"""Mistral Vibe parser on a real capture (tests/fixtures/mistral-vibe/tool_then_answer: Vibe 3.0.2's session
store as the run left it, and the model server's usage lines of that run)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from support import collect as collect_in_process
from support import entry_tokens, long_after, prepare_fixture, read_output, truth_from_file
from support.agents import by_name, fixture_records, run_pipeline
from support.collect_once import collect_cli

from collector.agents import mistral_vibe
from collector.model import RawRecord
from collector.model.entry import UNREADABLE

CASE = Path(__file__).parent.parent / "fixtures" / "mistral-vibe" / "tool_then_answer"
SESSION = "48482b9c-10de-6db7-66cc-444e6fbdf16f"
META = CASE / "home" / ".vibe" / "logs" / "session" / "unified" / SESSION / "meta.json"


def journal() -> list[RawRecord]:
    return fixture_records("mistral-vibe", "tool_then_answer", "transcript")


def meta() -> RawRecord:
    return RawRecord("mistral-vibe", "json_file", json.loads(META.read_text()), "fp", "h", 1, {"path": str(META)})


def run(*batches: list[RawRecord]) -> list[dict[str, Any]]:
    return run_pipeline("mistral-vibe", mistral_vibe.parse, batches)


def served() -> list[dict[str, Any]]:
    return [json.loads(x)["usage"] for x in (CASE / "response_usage.jsonl").read_text().splitlines() if x.strip()]


def tool_result_record(**structured: Any) -> RawRecord:
    """The run's own tool_succeeded line, with its bash output changed as given."""
    (line,) = [r for r in journal() if r.data["type"] == "core_input"
               and r.data["payload"]["input"]["command"]["type"] == "tool_succeeded"]
    data = copy.deepcopy(line.data)
    data["payload"]["input"]["command"]["result"]["structured_content"].update(structured)
    return RawRecord(line.agent, line.kind, data, line.source_id, line.position, 1, dict(line.meta))


def test_every_model_call_has_the_servers_exact_usage() -> None:
    responses = by_name(run(journal()), "llm.response")
    truth = served()
    assert len(responses) == len(truth) == 2
    for entry, usage in zip(responses, truth, strict=True):
        assert entry["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]  # Vibe's input includes the cache
        assert entry["gen_ai.usage.cache_read.input_tokens"] == usage["prompt_tokens_details"]["cached_tokens"]
        assert entry["gen_ai.usage.output_tokens"] == usage["completion_tokens"]
        assert entry["gen_ai.usage.total_tokens"] == usage["total_tokens"]
        assert entry["gen_ai.session.id"] == SESSION
    assert [e["gen_ai.response.finish_reasons"] for e in responses] == [["tool_call"], ["stop"]]


def test_prompt_tool_call_and_result_of_the_turn() -> None:
    entries = run(journal())
    (prompt,) = by_name(entries, "user.prompt")
    (call,), (result,) = by_name(entries, "tool.call"), by_name(entries, "tool.result")
    assert prompt["gen_ai.turn.id"].startswith("turn-")
    assert prompt["gen_ai.input.messages"][0]["parts"][0]["content"].startswith("Please run `echo hi`")
    assert call["gen_ai.tool.call.id"] == result["gen_ai.tool.call.id"] == "call_00b6f9a71ca84c8c94750e8c"
    assert call["gen_ai.tool.name"] == "bash" and call["gen_ai.tool.call.arguments"] == {"command": "echo hi"}
    assert result["tool.result.status"] == "success" and result["process.exit.code"] == 0
    assert result["gen_ai.tool.call.result"]["stdout"] == "hi\n"
    assert {e["gen_ai.turn.id"] for e in entries if e["event.name"] != "session.status"} == {prompt["gen_ai.turn.id"]}
    times = [e["time_unix_nano"] for e in entries]
    assert times == sorted(times) and times[0] // 10**9 == 1796165397  # determinism.time_unix_ms of the prompt


def test_a_failing_command_is_an_error_with_its_exit_code() -> None:
    """bash reports a command that exits 1 as ``tool_succeeded`` with ``returncode: 1`` (the real run of
    a failing command); the result is an error."""
    (entry,) = mistral_vibe.parse(tool_result_record(returncode=1, stdout="", stderr="boom"))
    assert entry.attributes["tool.result.status"] == "error"
    assert entry.attributes["error.type"] == "exit_code" and entry.attributes["process.exit.code"] == 1


def test_a_failed_tool_is_an_error_with_vibes_message() -> None:
    """``tool_failed`` as Vibe 3.0.2 wrote it for read_file of a missing file (the e2e test runs it)."""
    record = tool_result_record()
    command = record.data["payload"]["input"]["command"]
    command["type"] = "tool_failed"
    command["result"] = {"content": [], "type": "failure", "error": {
        "code": "tool_failed", "details": None, "message": "File not found at: x", "retryable": False}}
    (entry,) = mistral_vibe.parse(record)
    assert entry.attributes["tool.result.status"] == "error"
    assert entry.attributes["error.type"] == "tool_failed"
    assert entry.attributes["error.message"] == "File not found at: x"


def test_meta_json_gives_the_session_start() -> None:
    (start,) = by_name(run([meta()]), "session.start")
    assert start["gen_ai.session.id"] == SESSION
    assert start["workspace.path"].endswith("/work") and start["agent.model"] == "devstral-fake"
    assert start["time_unix_nano"] // 10**6 == 1796165395644  # start_time 2026-12-01T22:49:55.644


def test_only_core_input_lines_make_entries_and_the_session_is_the_folder() -> None:
    lines = journal()
    others = [r for r in lines if r.data["type"] != "core_input"]
    assert others and all(mistral_vibe.parse(r) == [] for r in others)
    made = [e for r in lines for e in mistral_vibe.parse(r)]
    assert made and {e.session_id for e in made} == {SESSION}
    moved = RawRecord("mistral-vibe", "transcript", lines[1].data, "fp", "0", 1, {"path": "/x/journal.jsonl"})
    assert {e.session_id for e in mistral_vibe.parse(moved)} == {None}  # not a journal folder: no session


def test_wrong_typed_ids_are_counted_not_dropped_silently() -> None:
    record = tool_result_record()
    record.data["payload"]["input"]["command"]["call_id"] = 7
    (marker,) = mistral_vibe.parse(record)
    assert marker.name == UNREADABLE and "call_id is a number" in marker.attributes["reason"]
    record.data["payload"]["input"] = "text"
    (marker,) = mistral_vibe.parse(record)
    assert marker.name == UNREADABLE and "input is a string" in marker.attributes["reason"]


def test_collect_once_from_files_alone(tmp_path: Path) -> None:
    """The real ``collect --once`` on the run's home: every model call the server answered, exactly, and
    nothing else."""
    paths = prepare_fixture(CASE, tmp_path)
    status = collect_cli(paths)
    entries = read_output(paths.output_dir)
    assert entry_tokens(entries) == truth_from_file(CASE / "response_usage.jsonl")
    assert not status["pipeline"]["unreadable"] and not status["pipeline"]["parse_errors"]
    assert {e["gen_ai.session.id"] for e in entries} == {SESSION}


def test_a_journal_segment_vibe_deletes_after_it_was_read_loses_and_repeats_nothing(tmp_path: Path) -> None:
    """Vibe deletes a journal segment once a newer snapshot covers it: what was read stays, nothing is
    read twice."""
    paths = prepare_fixture(CASE, tmp_path)
    first = collect_in_process(paths, clock=long_after)
    segment = next(paths.home.rglob("journal/0000000000000001.jsonl"))
    segment.unlink()
    collect_in_process(paths, clock=long_after)
    after = read_output(paths.output_dir)
    assert len(after) == len(first) and entry_tokens(after) == truth_from_file(CASE / "response_usage.jsonl")
