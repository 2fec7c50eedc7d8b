"""A value of the wrong SQLite storage class where a source takes its position stops nothing (issue 34)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from support import FIXTURES, assert_no_duplicates, prepare_fixture, read_output
from support.collect_once import collect_cli


def _mutated_collected_twice(case: str, db_file: str, sql: list[str], tmp_path: Path) -> tuple[dict[str, Any], ...]:
    """Collect the fixture clean, then with ``sql`` run on its database, twice (collect_cli asserts exit 0
    each time); assert the mutated run delivers the clean run's entries exactly once. The three statuses."""
    clean = prepare_fixture(FIXTURES / case, tmp_path / "clean")
    collect_cli(clean)
    whole = Counter(e["event.id"] for e in read_output(clean.output_dir))
    paths = prepare_fixture(FIXTURES / case, tmp_path / "bad")
    db = sqlite3.connect(paths.home / db_file)
    with db:
        for statement in sql:
            db.execute(statement)
    db.close()
    first, second = collect_cli(paths), collect_cli(paths)
    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    assert Counter(e["event.id"] for e in entries) == whole
    return first, second


def test_a_blob_watermark_row_is_quarantined_and_collect_exits_0_twice(tmp_path: Path) -> None:
    _, status = _mutated_collected_twice(
        "opencode/tool_then_answer", ".local/share/opencode/opencode.db",
        ["INSERT INTO message SELECT 'msg_zzbad', session_id, time_created, x'ff', data FROM message LIMIT 1"],
        tmp_path)
    assert status["quarantine"]["by_source"] == {"opencode:sqlite": {
        "boundary: the message row's watermark time_updated is a BLOB, not a number": 1}}


def test_a_text_watermark_table_reads_on_past_a_blob_row(tmp_path: Path) -> None:
    """Cline's sessions.db keeps ISO text in updated_at: text is a position; a BLOB there is refused once and
    every other row is delivered exactly once."""
    first, status = _mutated_collected_twice(
        "cline/tool_then_answer", ".cline/data/db/sessions.db",
        ["CREATE TEMP TABLE one AS SELECT * FROM sessions LIMIT 1",
         "UPDATE one SET session_id = 'zz_bad', updated_at = x'ff'",
         "INSERT INTO sessions SELECT * FROM one"], tmp_path)
    assert first["sources"]["cline:sessions"]["records"] > 0  # the text rows were read, not refused
    assert status["quarantine"]["by_source"] == {"cline:sqlite": {
        "boundary: the sessions row's watermark updated_at is a BLOB, not a number": 1}}
