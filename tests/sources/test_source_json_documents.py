"""The json_file source: whole-file JSON documents rewritten in place, with checkpoints."""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from support import assert_no_duplicates, collect, make_paths

from collector.sources.base import Item
from collector.sources.json_documents import JsonDocuments


def read(source: JsonDocuments) -> list[Item]:
    async def go() -> list[Item]:
        return [item async for item in source.read()]

    return asyncio.run(go())


def documents(items: list[Item]) -> list[dict[str, Any]]:
    return [record.data for record, _ in items if record is not None]


def positions(items: list[Item]) -> dict[str, dict[str, Any]]:
    return {p.stream: p.value for _, p in items}


def bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_each_version_of_a_rewritten_file_is_read_once(tmp_path: Path) -> None:
    doc = tmp_path / "session-1.json"
    source = JsonDocuments("t", "a", [str(tmp_path / "*.json")], {})

    doc.write_text(json.dumps({"v": 1}))
    assert documents(read(source)) == [{"v": 1}]
    assert read(source) == []  # unchanged: not even opened

    doc.write_text(json.dumps({"v": 1}))  # rewritten with the same content
    bump_mtime(doc)
    items = read(source)
    assert documents(items) == [] and len(items) == 1  # the position moves, nothing is delivered

    with doc.open("r+") as f:  # rewritten in place, longer
        f.truncate(0)
        f.write(json.dumps({"v": 2, "more": [1, 2, 3]}))
    assert documents(read(source)) == [{"v": 2, "more": [1, 2, 3]}]

    tmp = tmp_path / "session-1.json.tmp"  # replaced atomically (write + rename)
    tmp.write_text(json.dumps({"v": 3}))
    tmp.replace(doc)
    items = read(source)
    assert documents(items) == [{"v": 3}]
    record = items[0][0]
    assert (
        record is not None and record.kind == "json_file" and record.position == items[0][1].value["sha256"]
    )
    assert source.stats.records == 3


def test_a_restart_resumes_from_the_stored_hash(tmp_path: Path) -> None:
    doc = tmp_path / "a.json"
    doc.write_text(json.dumps({"v": 1}))
    first = read(JsonDocuments("t", "a", [str(tmp_path / "*.json")], {}))
    stored = positions(first)
    assert list(stored) == [f"t:{doc}"]

    assert read(JsonDocuments("t", "a", [str(tmp_path / "*.json")], stored)) == []
    bump_mtime(doc)  # touched, same content: no record after a restart either
    assert documents(read(JsonDocuments("t", "a", [str(tmp_path / "*.json")], stored))) == []
    doc.write_text(json.dumps({"v": 2}))
    assert documents(read(JsonDocuments("t", "a", [str(tmp_path / "*.json")], stored))) == [{"v": 2}]


def test_a_half_written_document_waits_for_the_next_change(tmp_path: Path) -> None:
    doc = tmp_path / "a.json"
    doc.write_text('{"messages": [{"id": "m1"')
    source = JsonDocuments("t", "a", [str(tmp_path / "*.json")], {})
    assert documents(read(source)) == [] and source.stats.malformed == 1
    assert read(source) == []  # not re-parsed (nor re-logged) until it changes
    doc.write_text('{"messages": [{"id": "m1"}]}')
    assert documents(read(source)) == [{"messages": [{"id": "m1"}]}]
    doc.write_text("[1, 2]")
    assert documents(read(source)) == [] and source.stats.malformed == 2  # not an object


def test_oversized_documents_are_counted_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "big.json").write_text(json.dumps({"x": "y" * 2000}))
    (tmp_path / "small.json").write_text("{}")
    source = JsonDocuments("t", "a", [str(tmp_path / "*.json")], {}, max_bytes=1000)
    assert documents(read(source)) == [{}]
    assert source.stats.oversized == 1


def gemini_message(kind: str, msg_id: str, second: int, **extra: Any) -> dict[str, Any]:
    return {"id": msg_id, "timestamp": f"2025-06-01T10:00:{second:02d}.000Z", "type": kind, **extra}


def checkpoint(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "sessionId": "0a1b2c3d-0000-4000-8000-000000000001",
        "projectHash": "p",
        "startTime": "2025-06-01T10:00:00.000Z",
        "lastUpdated": "2025-06-01T10:01:00.000Z",
        "messages": messages,
    }


def test_whole_file_json_rewrite_checkpoint(tmp_path: Path) -> None:
    """An older Gemini CLI rewrites chats/session-*.json after every message. Across collector runs
    (restarts) and rewrites, every message is reported exactly once."""
    home = tmp_path / "home"
    doc = home / ".gemini" / "tmp" / "0f1e2d" / "chats" / "session-2025-06-01T10-00-0a1b2c3d.json"
    doc.parent.mkdir(parents=True)
    paths = make_paths(tmp_path, home)
    tokens = {"input": 100, "output": 7, "cached": 10, "thoughts": 0, "tool": 0, "total": 107}
    turn1 = [
        gemini_message("user", "u1", 1, content=[{"text": "first"}]),
        gemini_message("gemini", "g1", 2, content="one", tokens=tokens, model="gemini-2.5-pro"),
    ]
    turn2 = [
        gemini_message("user", "u2", 3, content=[{"text": "second"}]),
        gemini_message(
            "gemini",
            "g2",
            4,
            content="",
            tokens={**tokens, "output": 9},
            model="gemini-2.5-pro",
            toolCalls=[
                {
                    "id": "c1",
                    "name": "run_shell_command",
                    "args": {"command": "false"},
                    "status": "success",
                    "timestamp": "2025-06-01T10:00:05.000Z",
                    "result": [
                        {"functionResponse": {"id": "c1", "response": {"output": "Output: \nExit Code: 1"}}}
                    ],
                }
            ],
        ),
    ]

    doc.write_text(json.dumps(checkpoint(turn1[:1])))
    collect(paths)
    doc.write_text(json.dumps(checkpoint(turn1), indent=2))  # rewritten whole, reformatted
    collect(paths)
    doc.write_text(json.dumps(checkpoint(turn1 + turn2)))
    collect(paths)
    bump_mtime(doc)
    entries = collect(paths)

    assert_no_duplicates(entries)
    counts = Counter(e["event.name"] for e in entries)
    assert {k: counts[k] for k in ("user.prompt", "llm.response", "tool.call", "tool.result")} == {
        "user.prompt": 2,
        "llm.response": 2,
        "tool.call": 1,
        "tool.result": 1,
    }
    assert next(e for e in entries if e["event.name"] == "tool.result")["tool.result.status"] == "error"
    assert {e["source.kind"] for e in entries if e["event.name"] != "session.status"} == {"json_file"}


# ------------------------------------------------------------------------------ items of one array


def _messages_doc(path: Path, messages: list[dict[str, Any]], **header: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")  # the agent's whole-document rewrite
    tmp.write_text(json.dumps({"sessionId": "s1", "agent": "lead", "system_prompt": "long text",
                               **header, "messages": messages}))
    tmp.replace(path)
    bump_mtime(path)


def _items_source(tmp_path: Path, stored: dict[str, dict[str, Any]] | None = None) -> JsonDocuments:
    return JsonDocuments("t", "a", [str(tmp_path / "*.messages.json")], stored or {}, items="messages",
                         header=("sessionId", "agent"))


def test_a_rewritten_document_yields_only_the_elements_it_did_not_yield_before(tmp_path: Path) -> None:
    doc = tmp_path / "s1.messages.json"
    source = _items_source(tmp_path)
    m = [{"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant"} for i in range(5)]

    _messages_doc(doc, [])
    items = read(source)
    assert documents(items) == [] and len(items) == 1  # nothing yet: the position still moves
    _messages_doc(doc, m[:2])
    first = read(source)
    assert documents(first) == [{"item": m[0], "index": 0, "document": {"sessionId": "s1", "agent": "lead"}},
                                {"item": m[1], "index": 1, "document": {"sessionId": "s1", "agent": "lead"}}]
    assert {r.kind for r, _ in first if r is not None} == {"json_item"}
    assert len({r.position for r, _ in first if r is not None}) == 2  # one id each
    _messages_doc(doc, m[:2], updated_at="later")  # rewritten with no new message
    assert documents(read(source)) == []
    _messages_doc(doc, m[:5])
    assert [d["index"] for d in documents(read(source))] == [2, 3, 4]
    assert source.stats.records == 5


def test_a_restart_goes_on_after_the_last_element_committed(tmp_path: Path) -> None:
    doc = tmp_path / "s1.messages.json"
    m = [{"id": f"m{i}"} for i in range(4)]
    _messages_doc(doc, m[:3])
    items = read(_items_source(tmp_path))
    # a crash after the second element was committed: its position is what the checkpoint holds
    stream, value = items[1][1].stream, items[1][1].value
    assert value["items"] == 2
    again = read(_items_source(tmp_path, {stream: value}))
    assert [d["index"] for d in documents(again)] == [2]
    _messages_doc(doc, m)
    later = read(_items_source(tmp_path, positions(again)))
    assert [d["item"] for d in documents(later)] == [m[3]]


def test_a_rewritten_history_is_yielded_again_and_the_repeats_dedupe(tmp_path: Path) -> None:
    doc = tmp_path / "s1.messages.json"
    source = _items_source(tmp_path)
    _messages_doc(doc, [{"id": "a"}, {"id": "b"}])
    read(source)
    _messages_doc(doc, [{"id": "summary"}, {"id": "c"}])  # compacted: element 1 is not "b" any more
    assert [d["item"]["id"] for d in documents(read(source))] == ["summary", "c"]
    _messages_doc(doc, [{"id": "x"}])  # shorter than what was yielded
    assert [d["item"]["id"] for d in documents(read(source))] == ["x"]


def test_items_that_are_not_a_list_are_counted_and_skipped(tmp_path: Path) -> None:
    doc = tmp_path / "s1.messages.json"
    doc.write_text(json.dumps({"messages": {"not": "a list"}}))
    source = _items_source(tmp_path)
    items = read(source)
    assert documents(items) == [] and len(items) == 1 and source.stats.malformed == 1
