"""A value of the wrong SQLite storage class where a source takes its position stops nothing (issue 34)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

from support import FIXTURES, assert_no_duplicates, prepare_fixture, read_output
from test_hostile_files import collect_cli


def test_a_blob_watermark_row_is_quarantined_and_collect_exits_0_twice(tmp_path: Path) -> None:
    case = FIXTURES / "opencode" / "tool_then_answer"
    clean = prepare_fixture(case, tmp_path / "clean")
    collect_cli(clean)
    whole = Counter(e["event.id"] for e in read_output(clean.output_dir))
    paths = prepare_fixture(case, tmp_path / "bad")
    db = sqlite3.connect(paths.home / ".local" / "share" / "opencode" / "opencode.db")
    with db:
        db.execute("INSERT INTO message SELECT 'msg_zzbad', session_id, time_created, x'ff', data FROM message LIMIT 1")
    db.close()
    collect_cli(paths)
    status = collect_cli(paths)  # exits 0 again (asserted by collect_cli), adds nothing twice
    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    assert Counter(e["event.id"] for e in entries) == whole
    assert status["quarantine"]["by_source"] == {"opencode:sqlite": {
        "boundary: the message row's watermark time_updated is a BLOB, not a number": 1}}


def test_a_text_watermark_table_reads_on_past_a_blob_row(tmp_path: Path) -> None:
    """Cline's sessions.db keeps ISO text in updated_at: text is a position; a BLOB there is refused once and
    every other row is delivered exactly once."""
    case = FIXTURES / "cline" / "tool_then_answer"
    clean = prepare_fixture(case, tmp_path / "clean")
    collect_cli(clean)
    whole = Counter(e["event.id"] for e in read_output(clean.output_dir))
    paths = prepare_fixture(case, tmp_path / "bad")
    db = sqlite3.connect(paths.home / ".cline" / "data" / "db" / "sessions.db")
    with db:
        db.execute("CREATE TEMP TABLE one AS SELECT * FROM sessions LIMIT 1")
        db.execute("UPDATE one SET session_id = 'zz_bad', updated_at = x'ff'")
        db.execute("INSERT INTO sessions SELECT * FROM one")
    db.close()
    first = collect_cli(paths)
    assert first["sources"]["cline:sessions"]["records"] > 0  # the text rows were read, not refused
    collect_cli(paths)
    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    assert Counter(e["event.id"] for e in entries) == whole
    reasons = collect_cli(paths)["quarantine"]["by_source"]
    assert reasons == {"cline:sqlite": {"boundary: the sessions row's watermark updated_at is a BLOB, not a number": 1}}
