"""A lone UTF-16 surrogate (Node's emoji cut in half) costs nothing on the paths beyond the JSONL files,
the spool and HTTP (tested in test_hostile_lines, test_spool_lines, test_ingest_server): an OpenCode row
whose JSON holds a surrogate escape, one whose TEXT holds the surrogate's raw bytes (not UTF-8 at all), and
a Qwen Code prompt line read back when its turn's telemetry arrives. Real fixtures, the real
`collect --once`: the clean run's event ids, nothing quarantined, no source error."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, assert_no_duplicates, prepare_fixture, read_output
from support.collect_once import collect_cli

OPENCODE = FIXTURES / "opencode" / "tool_then_answer"
QWEN = FIXTURES / "qwen-code" / "tool_then_answer"


def _ids(case: Path, tmp: Path, files_alone: bool = False) -> list[str]:
    paths = prepare_fixture(case, tmp)
    if files_alone:
        shutil.rmtree(paths.spool_dir)
    collect_cli(paths)
    return sorted(e["event.id"] for e in read_output(paths.output_dir))


def _rows(db: Path, table: str) -> list[tuple[str, str]]:
    conn = sqlite3.connect(db)
    try:
        return list(conn.execute(f"SELECT id, data FROM {table} ORDER BY rowid"))
    finally:
        conn.close()


@pytest.mark.parametrize("form", ["json escape", "raw bytes"])
def test_an_opencode_row_with_a_lone_surrogate_is_read(tmp_path: Path, form: str) -> None:
    clean = _ids(OPENCODE, tmp_path / "clean")
    paths = prepare_fixture(OPENCODE, tmp_path / "cut")
    db = paths.home / ".local" / "share" / "opencode" / "opencode.db"
    conn = sqlite3.connect(db)
    for table in ("message", "part"):
        for row_id, data in _rows(db, table):
            text = json.dumps({**json.loads(data), "note": "cut MARK"})
            if form == "json escape":
                conn.execute(f"UPDATE {table} SET data = ? WHERE id = ?", (text.replace("MARK", "\\ud83d"), row_id))
            else:  # the surrogate's own three bytes, as CESU-8 would write it: not UTF-8
                raw = text.encode().replace(b"MARK", b"\xed\xa0\xbd")
                conn.execute(f"UPDATE {table} SET data = CAST(? AS TEXT) WHERE id = ?", (raw, row_id))
    conn.commit()
    conn.close()
    status = collect_cli(paths)
    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    assert sorted(e["event.id"] for e in entries) == clean, "every row read, nothing lost"
    assert status["quarantine"]["records"] == 0
    source: dict[str, Any] = status["sources"]["opencode:db"]
    assert source["errors"] == 0 and source["last_error"] is None
    if form == "raw bytes":
        assert source["text_not_utf8"] >= 1, source  # counted: the connection decodes with U+FFFD since
    second = collect_cli(paths)
    assert second["sources"]["opencode:db"]["errors"] == 0
    assert sorted(e["event.id"] for e in read_output(paths.output_dir)) == clean, "and nothing twice"


def test_a_qwen_prompt_with_a_lone_surrogate_still_becomes_its_turns_prompt(tmp_path: Path) -> None:
    clean = _ids(QWEN, tmp_path / "clean", files_alone=True)  # the prompt from the chat log, not a hook
    paths = prepare_fixture(QWEN, tmp_path / "cut")
    shutil.rmtree(paths.spool_dir)
    chat = next((paths.home / ".qwen").rglob("chats/*.jsonl"))
    lines = chat.read_text().splitlines()
    user = next(n for n, line in enumerate(lines) if json.loads(line).get("type") == "user")
    data = json.loads(lines[user])
    data["message"]["parts"][0]["text"] = "cut MARK"
    lines[user] = json.dumps(data).replace("MARK", "\\ud83d")
    chat.write_text("\n".join(lines) + "\n")
    status = collect_cli(paths)
    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    assert sorted(e["event.id"] for e in entries) == clean
    assert any(e["event.name"] == "user.prompt" for e in entries) and status["quarantine"]["records"] == 0
