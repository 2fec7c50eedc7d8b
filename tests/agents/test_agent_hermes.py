"""Hermes Agent on its real run (tests/fixtures/hermes/tool_then_answer): state.db rows and agent.log lines,
through the real sqlite source, pipeline and `collect --once`, checked against the model server's own
usage records (response_usage.jsonl)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support import collect, entry_tokens, long_after, make_paths, prepare_fixture, read_output, truth_from_file

from collector.agents import hermes
from collector.cli.main import main
from collector.model import RawRecord

CASE = Path(__file__).parent.parent / "fixtures" / "hermes" / "tool_then_answer"
SESSION = "20261201_224845_fd3f2e"


def _row_totals(db: Path) -> dict[str, int]:
    con = sqlite3.connect(db)
    try:
        row = con.execute("SELECT input_tokens, cache_read_tokens, output_tokens, api_call_count FROM sessions "
                          "WHERE id = ?", (SESSION,)).fetchone()
    finally:
        con.close()
    return dict(zip(("input", "cache_read", "output", "calls"), row, strict=True))


def _sums(entries: list[dict[str, Any]]) -> dict[str, int]:
    calls = [e for e in entries if e["event.name"] == "llm.response"]
    return {"input": sum(e["gen_ai.usage.input_tokens"] - e["gen_ai.usage.cache_read.input_tokens"] for e in calls),
            "cache_read": sum(e["gen_ai.usage.cache_read.input_tokens"] for e in calls),
            "output": sum(e["gen_ai.usage.output_tokens"] for e in calls), "calls": len(calls)}


def test_each_model_call_has_the_servers_exact_tokens_and_they_add_up_to_the_session_totals(tmp_path: Path) -> None:
    paths = prepare_fixture(CASE, tmp_path)
    entries = collect(paths, clock=long_after)

    assert entry_tokens(entries) == truth_from_file(CASE / "response_usage.jsonl")
    # Hermes's own totals leave the cached tokens out of input (18306 = 27457 - 9151): the calls add up to them
    assert _sums(entries) == _row_totals(paths.home / ".hermes" / "state.db")
    calls = [e for e in entries if e["event.name"] == "llm.response"]
    assert all(e["gen_ai.turn.id"] == f"{SESSION}#1" for e in calls)


def test_each_call_says_it_is_one_call_and_carries_the_session_totals_apart(tmp_path: Path) -> None:
    """The agent's own fields (exported with export_agent_fields): the scope of the tokens, the call's
    number in its turn, and the session's totals as Hermes keeps them (never summed: they are not the call's)."""
    shutil.copytree(CASE / "home", tmp_path / "home")
    db = tmp_path / "home" / ".hermes" / "state.db"
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        row = dict(con.execute("SELECT * FROM session_model_usage").fetchone())
    finally:
        con.close()
    record = RawRecord("hermes", "sqlite", {"table": "session_model_usage", "row": row}, "s", "1", 1,
                       {"path": str(db)})

    calls = hermes.parse(record)

    assert [c.attributes["agent.hermes.api_call_number"] for c in calls] == [1, 2]
    assert {c.attributes["agent.hermes.usage_scope"] for c in calls} == {"per_call"}
    assert {(c.attributes["agent.hermes.session_input_tokens"], c.attributes["agent.hermes.session_api_call_count"])
            for c in calls} == {(18306, 2)}
    assert hermes.parse(record) == calls, "the same row read again makes the same entries (same ids)"


def test_collect_once_from_the_files_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = prepare_fixture(CASE, tmp_path)
    monkeypatch.setenv("AGENT_COLLECTOR_DATA_DIR", str(paths.data_dir))
    monkeypatch.setenv("AGENT_COLLECTOR_CONFIG_DIR", str(paths.config_dir))
    monkeypatch.setenv("HOME", str(paths.home))
    monkeypatch.delenv("HERMES_HOME", raising=False)

    assert main(["collect", "--once", "--home", str(paths.home), "-q"]) == 0

    entries = [e for e in read_output(paths.data_dir / "output") if e["gen_ai.agent.type"] == "hermes"]
    names = Counter(e["event.name"] for e in entries)
    assert {k: names[k] for k in ("session.start", "user.prompt", "tool.call", "tool.result", "llm.response")} == {
        "session.start": 1, "user.prompt": 1, "tool.call": 1, "tool.result": 1, "llm.response": 2}
    (result,) = [e for e in entries if e["event.name"] == "tool.result"]
    assert (result["gen_ai.tool.name"], result["tool.result.status"]) == ("terminal", "success")
    assert entry_tokens(entries) == truth_from_file(CASE / "response_usage.jsonl")


def _grow(home: Path, log_stamp: str, usage: tuple[int, int, int]) -> None:
    """One more turn of the session as Hermes writes it: a user and an assistant row, the totals raised
    in place, and the call's line in agent.log."""
    prompt, completion, cached = usage
    con = sqlite3.connect(home / ".hermes" / "state.db")
    try:
        (last,) = con.execute("SELECT MAX(timestamp) FROM messages").fetchone()
        con.execute("INSERT INTO messages(session_id, role, content, timestamp) VALUES (?, 'user', 'again?', ?)",
                    (SESSION, last + 60))
        con.execute("INSERT INTO messages(session_id, role, content, timestamp, finish_reason) "
                    "VALUES (?, 'assistant', 'yes', ?, 'stop')", (SESSION, last + 61))
        for table, key in (("sessions", "id"), ("session_model_usage", "session_id")):
            con.execute(f"UPDATE {table} SET input_tokens = input_tokens + ?, "
                        "cache_read_tokens = cache_read_tokens + ?, output_tokens = output_tokens + ?, "
                        f"api_call_count = api_call_count + 1 WHERE {key} = ?",
                        (prompt - cached, cached, completion, SESSION))
        con.execute("UPDATE session_model_usage SET last_seen = ? WHERE session_id = ?", (last + 61, SESSION))
        con.commit()
    finally:
        con.close()
    with (home / ".hermes" / "logs" / "agent.log").open("a") as log:
        log.write(f"{log_stamp} INFO [{SESSION}] agent.conversation_loop: API call #1: model=fake-model "
                  f"provider=custom in={prompt} out={completion} total={prompt + completion} latency=1.0s "
                  f"cache={cached}/{prompt} (50%)\n")


def test_a_second_collect_after_the_session_grew_counts_only_the_new_call(tmp_path: Path) -> None:
    paths = prepare_fixture(CASE, tmp_path)
    first = collect(paths, output=tmp_path / "out1")
    _grow(paths.home, "2026-12-01 22:50:30,001", (14000, 20, 7000))

    second = collect(paths, output=tmp_path / "out2")

    new = [e for e in second if e["event.name"] not in ("session.status",)]
    assert not {e["event.id"] for e in new} & {e["event.id"] for e in first}, "nothing delivered twice"
    assert Counter(e["event.name"] for e in new) == {"user.prompt": 1, "llm.response": 1}
    assert entry_tokens(new) == Counter({(14000, 20, 7000, 0): 1})
    (call,) = [e for e in new if e["event.name"] == "llm.response"]
    (prompt,) = [e for e in new if e["event.name"] == "user.prompt"]
    assert call["gen_ai.turn.id"] == prompt["gen_ai.turn.id"]
    assert _sums(first + second) == _row_totals(paths.home / ".hermes" / "state.db")


def test_a_log_without_the_calls_makes_no_tokens_up_and_is_counted(tmp_path: Path) -> None:
    paths = prepare_fixture(CASE, tmp_path)
    (paths.home / ".hermes" / "logs" / "agent.log").unlink()

    entries = collect(paths, clock=long_after)

    assert not [e for e in entries if e["event.name"] == "llm.response"]
    assert {e["event.name"] for e in entries} >= {"user.prompt", "tool.call", "tool.result"}
    status = json.loads((paths.state_dir / "status.json").read_text())
    assert any("agent.log" in reason for reason in json.dumps(status["pipeline"]["unreadable"]).split('"'))


def _tool_row(content: str) -> RawRecord:
    row = {"id": 3, "session_id": SESSION, "role": "tool", "content": content, "tool_call_id": "call_1",
           "tool_name": "terminal", "timestamp": 1796165360.8}
    return RawRecord("hermes", "sqlite", {"table": "messages", "row": row}, "s", "1", 1, {"path": ""})


@pytest.mark.parametrize(("content", "error_type"), [
    ('{"output": "cat: nope.txt: No such file or directory", "exit_code": 1, "error": null}', "exit_code"),
    ('{"content": "", "total_lines": 0, "error": "File not found: nope.txt"}', "tool_error"),
])
def test_a_failed_result_is_an_error_though_hermes_has_no_error_flag(content: str, error_type: str) -> None:
    (entry,) = hermes.parse(_tool_row(content))
    assert (entry.attributes["tool.result.status"], entry.attributes["error.type"]) == ("error", error_type)
    assert "gen_ai.tool.call.result" not in entry.attributes


def test_a_successful_result_keeps_its_output() -> None:
    (entry,) = hermes.parse(_tool_row('{"output": "hi", "exit_code": 0, "error": null}'))
    assert entry.attributes["tool.result.status"] == "success"
    assert entry.attributes["process.exit.code"] == 0


def test_the_fixture_needs_no_wal(tmp_path: Path) -> None:
    """The fixture's database is the run's, checkpointed: the sqlite source reads it without -wal or -shm."""
    home = tmp_path / "home"
    shutil.copytree(CASE / "home", home)
    assert not list((CASE / "home" / ".hermes").glob("state.db-*"))
    assert collect(make_paths(tmp_path, home), clock=long_after)
