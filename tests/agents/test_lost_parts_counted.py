"""Every part of a record a parser has to leave out is counted in `status` with its cause (#22 item 7):
a Codex rollout line whose `payload` is a list or a string, a Qwen Code chat record whose `message` is a
list or whose `message.parts` is an object. An integer Qwen `sessionId` is read as the id it is, and a
20 MB OpenCode `message.data` or tool output loses nothing. Real fixtures, the real `collect --once`;
each time the neighbours arrive exactly once and the run exits 0."""

from __future__ import annotations

import copy
import json
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

from support import FIXTURES, ROOT, assert_no_duplicates, prepare_fixture, read_output
from support.collect_once import collect_cli, expected_counts

CODEX = FIXTURES / "codex" / "tool_then_answer"
QWEN = FIXTURES / "qwen-code" / "tool_then_answer"
OPENCODE = FIXTURES / "opencode" / "tool_then_answer"


def _status_text(paths: object) -> str:
    env = {"HOME": str(paths.home), "AGENT_COLLECTOR_DATA_DIR": str(paths.data_dir),  # type: ignore[attr-defined]
           "AGENT_COLLECTOR_CONFIG_DIR": str(paths.config_dir), "PATH": "/usr/bin:/bin"}  # type: ignore[attr-defined]
    done = subprocess.run([sys.executable, "-m", "collector", "status", "--home", str(paths.home)],  # type: ignore[attr-defined]
                          env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    return done.stdout


def test_codex_payloads_that_are_not_objects_are_counted(tmp_path: Path) -> None:
    paths = prepare_fixture(CODEX, tmp_path)
    rollout = next((paths.home / ".codex" / "sessions").rglob("rollout-*.jsonl"))
    with rollout.open("a") as f:
        for payload in ([{"type": "function_call", "name": "shell"}], "text", [1, 2]):
            f.write(json.dumps({"timestamp": "2026-11-30T11:08:00.000Z", "type": "response_item",
                                "payload": payload}) + "\n")
    status = collect_cli(paths)
    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    assert Counter(e["event.name"] for e in entries) == expected_counts(CODEX), "every neighbour, once"
    assert status["pipeline"]["unreadable"] == {"codex: payload is a list, not an object": 2,
                                                "codex: payload is a string, not an object": 1}
    assert "record parts left out (a field of an unreadable shape): codex: payload is a list, not an " \
           "object (2)" in _status_text(paths)
    assert collect_cli(paths)["pipeline"]["unreadable"] == {}, "read once: a second run counts nothing again"


def _qwen_call(chat: Path) -> dict[str, object]:
    """The first assistant record of the chat log that calls a tool."""
    for line in chat.read_text().splitlines():
        data = json.loads(line)
        if data.get("type") == "assistant" and "functionCall" in line:
            return dict(data)
    raise AssertionError(f"no assistant record with a tool call in {chat}")


def test_qwen_message_shapes_are_counted_and_an_integer_session_id_is_read(tmp_path: Path) -> None:
    paths = prepare_fixture(QWEN, tmp_path)
    chat = next((paths.home / ".qwen").rglob("chats/*.jsonl"))
    call = _qwen_call(chat)
    as_list = copy.deepcopy(call)
    as_list.update(uuid="00000000-0000-4000-8000-00000000a001", message=[{"functionCall": {"id": "x"}}])
    parts_object = copy.deepcopy(call)
    parts_object.update(uuid="00000000-0000-4000-8000-00000000a002")
    parts_object["message"] = {"role": "model", "parts": {"functionCall": {"id": "y"}}}
    numbered = copy.deepcopy(call)
    numbered.update(uuid="00000000-0000-4000-8000-00000000a003", sessionId=12345)
    for part in numbered["message"]["parts"]:  # type: ignore[index]
        if "functionCall" in part:
            part["functionCall"]["id"] = "call_numbered_session"
    with chat.open("a") as f:
        for record in (as_list, parts_object, numbered):
            f.write(json.dumps(record) + "\n")
    status = collect_cli(paths)
    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    counts = Counter(e["event.name"] for e in entries if e.get("gen_ai.session.id") != "12345")
    assert counts == expected_counts(QWEN), "every neighbour, once"
    numbered_call = [e for e in entries if e.get("gen_ai.tool.call.id") == "call_numbered_session"
                     and e["event.name"] == "tool.call"]
    assert [e.get("gen_ai.session.id") for e in numbered_call] == ["12345"], "the integer id, as a string"
    assert status["pipeline"]["unreadable"] == {"qwen-code: message is a list, not an object": 1,
                                                "qwen-code: message.parts is an object, not a list": 1}


def test_a_20_mb_opencode_message_or_tool_output_loses_nothing(tmp_path: Path) -> None:
    clean = read_output_of(OPENCODE, tmp_path / "clean")
    paths = prepare_fixture(OPENCODE, tmp_path / "big")
    db = paths.home / ".local" / "share" / "opencode" / "opencode.db"
    conn = sqlite3.connect(db)
    message_id, data = conn.execute("SELECT id, data FROM message ORDER BY rowid DESC LIMIT 1").fetchone()
    message = json.loads(data)
    message["padding"] = "m" * 20_000_000
    conn.execute("UPDATE message SET data = ? WHERE id = ?", (json.dumps(message), message_id))
    part_id, data = next(r for r in conn.execute("SELECT id, data FROM part") if '"tool"' in r[1])
    part = json.loads(data)
    part["state"]["output"] = "p" * 20_000_000
    conn.execute("UPDATE part SET data = ? WHERE id = ?", (json.dumps(part), part_id))
    conn.commit()
    conn.close()
    status = collect_cli(paths)
    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    assert sorted(e["event.id"] for e in entries) == sorted(e["event.id"] for e in clean)
    tokens = sorted((e["event.id"], e.get("gen_ai.usage.input_tokens"), e.get("gen_ai.usage.output_tokens"))
                    for e in entries if e["event.name"] == "llm.response")
    assert tokens == sorted((e["event.id"], e.get("gen_ai.usage.input_tokens"), e.get("gen_ai.usage.output_tokens"))
                            for e in clean if e["event.name"] == "llm.response")
    assert status["pipeline"]["unreadable"] == {} and status["quarantine"]["records"] == 0


def read_output_of(case: Path, tmp: Path) -> list[dict[str, object]]:
    paths = prepare_fixture(case, tmp)
    collect_cli(paths)
    out = read_output(paths.output_dir)
    shutil.rmtree(tmp)
    return out


def _claude_tool_line_alone(tmp: Path, depth: int) -> object:
    """The Claude Code fixture from its transcript alone, the answer's tool_use line the only line of its
    message (as Claude Code writes a message of one tool call), so it carries the call's usage; its tool
    input gets a value nested ``depth`` deep."""
    paths = prepare_fixture(FIXTURES / "claude-code" / "tool_then_answer", tmp)
    shutil.rmtree(paths.spool_dir, ignore_errors=True)
    transcript = next((paths.home / ".claude" / "projects").rglob("*.jsonl"))
    lines = [json.loads(line) for line in transcript.read_text().splitlines()]
    tool = next(n for n, d in enumerate(lines) if d.get("type") == "assistant"
                and any(c.get("type") == "tool_use" for c in d["message"]["content"]))
    same = [n for n, d in enumerate(lines) if n != tool and d.get("type") == "assistant"
            and d["message"].get("id") == lines[tool]["message"]["id"]]
    deep: object = "the bottom"
    for _ in range(depth):
        deep = {"nested": deep}
    lines[tool]["message"]["content"][0]["input"]["deep"] = deep
    transcript.write_text("".join(json.dumps(d) + "\n" for n, d in enumerate(lines) if n not in same))
    return paths


def test_a_tool_input_nested_deeper_than_64_is_cut_and_the_model_call_keeps_its_tokens(tmp_path: Path) -> None:
    clean_paths = _claude_tool_line_alone(tmp_path / "clean", 3)
    collect_cli(clean_paths)
    clean = read_output(clean_paths.output_dir)  # type: ignore[attr-defined]
    paths = _claude_tool_line_alone(tmp_path / "deep", 100)
    status = collect_cli(paths)  # type: ignore[arg-type]
    entries = read_output(paths.output_dir)  # type: ignore[attr-defined]
    assert_no_duplicates(entries)
    assert sorted(e["event.id"] for e in entries) == sorted(e["event.id"] for e in clean), "nothing lost"

    def usage(es: list[dict[str, object]]) -> list[tuple[object, ...]]:
        return sorted((e["event.id"], e.get("gen_ai.usage.input_tokens"), e.get("gen_ai.usage.output_tokens"),
                       e.get("gen_ai.usage.cache_read.input_tokens")) for e in es if e["event.name"] == "llm.response")

    assert usage(entries) == usage(clean) and all(u[1] for u in usage(entries)), "every call keeps its tokens"
    cut = [e for e in entries if e.get("collector.truncated")]
    assert {e["collector.truncated"] for e in cut} == {"nested deeper than 64"}
    assert {"llm.response", "tool.call"} <= {e["event.name"] for e in cut}, "the line's model call and tool call"
    assert status["pipeline"]["truncated"] == {"claude-code": 1} and status["quarantine"]["records"] == 0
    assert "records read with their values below depth 64 left out: claude-code=1" in _status_text(paths)
