"""LoongSuite Pilot's correlation files as hostile input: the records read from a session's file, the
session id checked before it names a file, only regular files, the caps, every bad line skipped and
counted, and a file read again only when it changed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from collector.pipeline.correlation_files import MAX_FILE_BYTES, MAX_LINES, CorrelationFiles, file_name

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"  # the W3C recommendation's example
PARENT = "00f067aa0ba902b7"
TP = f"00-{TRACE}-{PARENT}-01"


def turn_line(text_hash: str = "ab" * 32, prefix: str = "Fix the", traceparent: str = TP) -> str:
    return json.dumps({"type": "turn", "sessionId": "s1", "contentHash": text_hash, "contentPrefix": prefix,
                       "traceparent": traceparent})


def write(folder: Path, session: str, *lines: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session}.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_turn_and_session_records_are_read_in_file_order(tmp_path: Path) -> None:
    write(tmp_path, "s1", json.dumps({"type": "session", "traceparent": TP}), turn_line("AB" * 32))
    files = CorrelationFiles(tmp_path)
    records = files.records("s1")
    assert [r.kind for r in records] == ["session", "turn"]
    assert records[1].content_hash == "ab" * 32, "the hash compared in lowercase"
    assert records[1].content_prefix == "Fix the"
    assert (records[0].parent.trace_id, records[0].parent.parent_id) == (TRACE, PARENT)
    assert len({r.ident for r in records}) == 2 and not files.problems


def test_two_equal_lines_are_two_records(tmp_path: Path) -> None:
    write(tmp_path, "s1", turn_line(), turn_line())
    records = CorrelationFiles(tmp_path).records("s1")
    assert len(records) == 2 and records[0].ident != records[1].ident


def test_no_file_is_no_record_and_no_problem(tmp_path: Path) -> None:
    files = CorrelationFiles(tmp_path / "missing")
    assert files.records("s1") == [] and not files.problems


@pytest.mark.parametrize("session", ["../s1", "a/b", ".hidden", "", "x" * 201, "s\x001", 7, None])
def test_a_session_id_that_is_not_a_plain_name_is_not_looked_up(tmp_path: Path, session: object) -> None:
    (tmp_path / "inner").mkdir()
    write(tmp_path, "s1", turn_line())  # what "../s1" would reach from inner/
    files = CorrelationFiles(tmp_path / "inner")
    assert file_name(session) is None
    assert files.records(session) == []


def test_a_uuid_session_id_is_a_file_name() -> None:
    assert file_name("41107763-ebf4-494c-ba48-6c6b1ea15d20") == "41107763-ebf4-494c-ba48-6c6b1ea15d20.jsonl"


def test_a_symlink_fifo_or_directory_is_refused_and_counted(tmp_path: Path) -> None:
    target = write(tmp_path / "elsewhere", "t", turn_line())
    (tmp_path / "s1.jsonl").symlink_to(target)
    os.mkfifo(tmp_path / "s2.jsonl")
    (tmp_path / "s3.jsonl").mkdir()
    files = CorrelationFiles(tmp_path)
    assert files.records("s1") == [] and files.records("s2") == [] and files.records("s3") == []
    assert sum(files.problems.values()) == 3, files.problems


@pytest.mark.parametrize(("line", "reason"), [
    ("not json", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({"type": "tool", "traceparent": TP}), "type is not"),
    (json.dumps({"type": "session", "traceparent": "00-zz-01"}), "traceparent is not a W3C"),
    (json.dumps({"type": "session"}), "traceparent is not a W3C"),
    (turn_line(text_hash="", prefix=""), "neither contentHash nor contentPrefix"),
    (json.dumps({"type": "turn", "contentHash": 5, "traceparent": TP}), "not a string"),
    (turn_line(prefix="p" * 5000), "not a string of at most"),
    (json.dumps({"type": "session", "traceparent": TP, "pad": "x" * 17000}), "over 16384 bytes"),
    (json.dumps({"type": "turn", "sessionId": "s2", "contentPrefix": "x", "traceparent": TP}), "another session"),
])
def test_a_bad_line_is_skipped_and_counted_and_its_neighbours_kept(tmp_path: Path, line: str, reason: str) -> None:
    write(tmp_path, "s1", turn_line(prefix="first"), line, turn_line(prefix="last"))
    files = CorrelationFiles(tmp_path)
    assert [r.content_prefix for r in files.records("s1")] == ["first", "last"]
    assert [k for k in files.problems if reason in k], files.problems


def test_bytes_that_are_not_utf8_do_not_stop_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "s1", turn_line(prefix="first"))
    with path.open("ab") as f:
        f.write(b"\xff\xfe{\n" + turn_line(prefix="last").encode() + b"\n")
    files = CorrelationFiles(tmp_path)
    assert [r.content_prefix for r in files.records("s1")] == ["first", "last"]
    assert sum(files.problems.values()) == 1


def test_the_line_cap(tmp_path: Path) -> None:
    write(tmp_path, "s1", *[turn_line(prefix=f"p{n}") for n in range(MAX_LINES + 5)])
    files = CorrelationFiles(tmp_path)
    records = files.records("s1")
    assert len(records) == MAX_LINES and records[-1].content_prefix == f"p{MAX_LINES - 1}"
    assert [k for k in files.problems if f"over {MAX_LINES} lines" in k]


def test_the_size_cap_reads_the_whole_lines_before_it(tmp_path: Path) -> None:
    line = turn_line(prefix="x" * 3000)
    count = MAX_FILE_BYTES // (len(line) + 1) + 10
    write(tmp_path, "s1", *[line] * count)
    files = CorrelationFiles(tmp_path)
    records = files.records("s1")
    assert 0 < len(records) == MAX_FILE_BYTES // (len(line) + 1) < count
    assert [k for k in files.problems if f"over {MAX_FILE_BYTES} bytes" in k]
    assert not [k for k in files.problems if "JSON" in k], "the line cut at the cap is not counted as bad"


def test_a_file_is_read_again_only_when_it_changed(tmp_path: Path) -> None:
    path = write(tmp_path, "s1", "not json")
    files = CorrelationFiles(tmp_path)
    assert files.records("s1") == []
    assert files.records("s1") == []
    assert sum(files.problems.values()) == 1, "the unchanged file was not parsed again"
    with path.open("a") as f:
        f.write(turn_line() + "\n")
    assert [r.kind for r in files.records("s1")] == ["turn"]
    assert sum(files.problems.values()) == 2, "the changed file parsed again, its bad line with it"
