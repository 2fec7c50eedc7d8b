"""Only regular files are read: FIFOs, devices, directories and symlinks to them named like agent files
are refused with a logged, counted reason (never a hang, never a crash); a hook's transcript_path is
followed only inside the agent's own source globs; the line reader keeps BOM and lone-surrogate lines and
sees an in-place rewrite that keeps the first line. Each case runs the real `collect --once` (under a
timeout, so a hang fails) and checks that the fixture's own records are all in the output exactly once and
that status names the cause."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, ROOT, assert_no_duplicates, prepare_fixture, read_output
from support.collect_once import CLAUDE, assert_fixture_complete, claude_project, collect_cli, expected_counts


@pytest.mark.parametrize("kind", ["fifo", "dev_zero_symlink", "directory", "fifo_symlink"])
def test_a_non_regular_file_named_like_a_transcript_is_refused(tmp_path: Path, kind: str) -> None:
    paths = prepare_fixture(CLAUDE, tmp_path)
    bad = claude_project(paths) / "00000000-bad.jsonl"
    if kind == "fifo":
        os.mkfifo(bad)
    elif kind == "dev_zero_symlink":
        bad.symlink_to("/dev/zero")
    elif kind == "directory":
        bad.mkdir()
    else:
        os.mkfifo(tmp_path / "pipe")
        bad.symlink_to(tmp_path / "pipe")

    status = collect_cli(paths)

    assert_fixture_complete(paths)
    source = status["sources"]["claude-code:transcripts"]
    assert source.get("refused_files", 0) + source.get("refused_paths", 0) >= 1
    assert str(bad) in source["last_error"]
    assert "not a regular file" in source["last_error"] or "outside the agent's folders" in source["last_error"]


def test_fifo_opencode_db_and_gemini_session_json_do_not_hang_collect(tmp_path: Path) -> None:
    paths = prepare_fixture(FIXTURES / "gemini-cli" / "tool_then_answer", tmp_path)
    os.mkfifo(paths.home / ".gemini" / "tmp" / "work" / "chats" / "session-2026-11-30T11-00-fifo.json")
    opencode = paths.home / ".local" / "share" / "opencode"
    opencode.mkdir(parents=True)
    os.mkfifo(opencode / "opencode.db")

    status = collect_cli(paths)

    assert_fixture_complete(paths, FIXTURES / "gemini-cli" / "tool_then_answer")
    assert status["sources"]["gemini-cli:checkpoints"]["refused_files"] == 1
    [db] = [s for name, s in status["sources"].items() if name.startswith("opencode:") and "refused_files" in s]
    assert db["refused_files"] == 1 and "a FIFO" in db["last_error"]


def test_a_fifo_wal_beside_opencode_db_is_refused(tmp_path: Path) -> None:
    paths = prepare_fixture(FIXTURES / "opencode" / "failing_command", tmp_path)
    db = paths.home / ".local" / "share" / "opencode" / "opencode.db"
    os.mkfifo(str(db) + "-wal")
    status = collect_cli(paths)
    [source] = [s for name, s in status["sources"].items() if name.startswith("opencode:") and "refused_files" in s]
    assert "opencode.db-wal" in source["last_error"]


def hook_line(transcript: str) -> bytes:
    payload = {"session_id": "s-out", "transcript_path": transcript, "cwd": "/w", "hook_event_name": "SessionStart",
               "source": "startup"}
    return json.dumps({"ts": 1_796_040_000.0, "agent": "claude-code", "event": "SessionStart",
                       "payload": payload}).encode() + b"\n"


@pytest.mark.parametrize("where", ["outside", "dotdot", "symlink_out"])
def test_transcript_path_outside_the_agent_folders_is_not_followed(tmp_path: Path, where: str) -> None:
    paths = prepare_fixture(CLAUDE, tmp_path)
    transcript = next(claude_project(paths).glob("*.jsonl"))
    outside = tmp_path / "elsewhere" / "stolen.jsonl"
    outside.parent.mkdir()
    outside.write_bytes(transcript.read_bytes().replace(b"3717dcf6-6ccc-43e1-999e-09b113fae890", b"stolen-session"))
    named = {"outside": str(outside),
             "dotdot": str(claude_project(paths) / ".." / ".." / ".." / ".." / "elsewhere" / "stolen.jsonl"),
             "symlink_out": str(claude_project(paths) / "link.jsonl")}[where]
    if where == "symlink_out":
        Path(named).symlink_to(outside)
    with (paths.spool_dir / "claude-code" / "claude-code-2026-11-30.jsonl").open("ab") as f:
        f.write(hook_line(named))

    status = collect_cli(paths)
    collect_cli(paths)  # a second cycle would read a followed file

    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    assert not [e for e in entries if e.get("gen_ai.session.id") == "stolen-session"]
    fixture = Counter(e["event.name"] for e in entries if e.get("gen_ai.session.id") != "s-out")
    assert fixture == expected_counts(CLAUDE), "the fixture's own records, each once"
    assert status["sources"]["claude-code:transcripts"]["refused_paths"] >= 1


def test_an_outside_transcript_path_is_logged_once_however_many_hooks_name_it(tmp_path: Path) -> None:
    """Every hook of a session names its transcript: 40 hooks, one warning, the other 39 counted."""
    paths = prepare_fixture(CLAUDE, tmp_path)
    outside = tmp_path / "elsewhere" / "stolen.jsonl"
    with (paths.spool_dir / "claude-code" / "claude-code-2026-11-30.jsonl").open("ab") as f:
        for _ in range(40):
            f.write(hook_line(str(outside)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_COLLECTOR_")}
    env.update({"HOME": str(paths.home), "AGENT_COLLECTOR_DATA_DIR": str(paths.data_dir),
                "AGENT_COLLECTOR_CONFIG_DIR": str(paths.config_dir)})
    done = subprocess.run([sys.executable, "-m", "collector", "collect", "--once", "--home", str(paths.home)],
                          env=env, capture_output=True, timeout=60, cwd=ROOT, text=True)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "outside the agent's folders" in line]
    assert len([w for w in warnings if str(outside) in w]) == 1, done.stderr
    source = json.loads((paths.state_dir / "status.json").read_text())["sources"]["claude-code:transcripts"]
    # the fixture's own hooks name the transcript where it was captured (outside this home) too
    assert source["refused_paths"] == len(warnings) == 2
    assert source["refused_path_repeats"] >= 39
    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    fixture = Counter(e["event.name"] for e in entries if e.get("gen_ai.session.id") != "s-out")
    assert fixture == expected_counts(CLAUDE)


def test_refused_paths_are_remembered_within_a_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import collector.sources.jsonl_files as jsonl_files

    monkeypatch.setattr(jsonl_files, "REFUSED_REMEMBERED", 3)
    source = jsonl_files.JsonlFiles("c:t", "c", "transcript", [str(tmp_path / "projects" / "*" / "*.jsonl")], {})
    for n in range(10):
        assert not source.add_path(f"/elsewhere/{n}.jsonl")
    assert not source.add_path("/elsewhere/9.jsonl")
    assert len(source._outside) == 3
    assert source.stats.extra["refused_paths"] == 10 and source.stats.extra["refused_path_repeats"] == 1
    assert not source.add_path("/elsewhere/0.jsonl")  # forgotten: refused (and logged) again
    assert source.stats.extra["refused_paths"] == 11


def test_transcript_path_inside_the_globs_is_followed(tmp_path: Path) -> None:
    from collector.sources.jsonl_files import JsonlFiles

    source = JsonlFiles("c:t", "c", "transcript", [str(tmp_path / "projects" / "*" / "*.jsonl")], {})
    inside = tmp_path / "projects" / "p" / "s.jsonl"
    assert source.add_path(str(inside))
    assert not source.add_path(str(tmp_path / "projects" / "s.jsonl"))  # one folder short
    assert not source.add_path(str(tmp_path / "projects" / "p" / "q" / "s.jsonl"))  # * never crosses a /
    assert not source.add_path("/usr/x.jsonl")
    assert "/usr" not in source.watch_paths() and source.stats.extra["refused_paths"] == 3


def test_unreadable_folders_are_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from collector.sources.jsonl_files import JsonlFiles

    (tmp_path / "p" / "locked").mkdir(parents=True)
    (tmp_path / "p" / "open").mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, m: not str(p).endswith("locked") and real_access(p, m))
    source = JsonlFiles("c:t", "c", "transcript", [str(tmp_path / "p" / "*" / "*.jsonl")], {})
    source.files()
    assert source.stats.extra["unreadable_dirs"] == 1


def tailer(pattern: str, positions: dict[str, Any] | None = None) -> Any:
    from collector.sources.jsonl_files import JsonlFiles

    return JsonlFiles("t:hooks", "t", "hook", [pattern], positions or {})


def read_all(source: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    import asyncio

    async def run() -> list[Any]:
        return [item async for item in source.read()]

    items = asyncio.run(run())
    positions = {p.stream: p.value for _, p in items}
    return [r.data for r, _ in items if r is not None], positions


def test_bom_and_lone_surrogates_keep_their_lines(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    f.write_bytes(b'\xef\xbb\xbf{"n": 1}\n{"n": 2, "text": "cut \\ud83d", "tokens": 7}\n{"n": 3}\n')
    data, _ = read_all(tailer(str(tmp_path / "*.jsonl")))
    assert [d["n"] for d in data] == [1, 2, 3]
    assert data[1] == {"n": 2, "text": "cut \ufffd", "tokens": 7}


def test_an_in_place_rewrite_that_keeps_the_first_line_is_read_again(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    first = b'{"n": 0, "header": true}\n'
    f.write_bytes(first + b"".join(b'{"n": %d, "v": "old"}\n' % i for i in range(1, 10)))
    data, positions = read_all(tailer(str(tmp_path / "*.jsonl")))
    assert len(data) == 10
    with f.open("r+b") as out:  # same inode, same first line, as long as before, then longer
        out.write(first + b"".join(b'{"n": %d, "v": "new"}\n' % i for i in range(1, 14)))
    again, _ = read_all(tailer(str(tmp_path / "*.jsonl"), positions))
    assert [d["v"] for d in again if "v" in d] == ["new"] * 13


def test_posts_naming_a_fifo_or_a_system_folder_leave_the_daemon_answering(tmp_path: Path) -> None:
    from support.robust import Daemon

    daemon = Daemon(tmp_path)
    project = daemon.home / ".claude" / "projects" / "p"
    project.mkdir(parents=True)
    os.mkfifo(project / "fifo.jsonl")
    daemon.start()
    try:
        for name in (str(project / "fifo.jsonl"), "/usr/x.jsonl", str(project / ".." / ".." / ".." / "x.jsonl")):
            body = {"hook_event_name": "SessionStart", "session_id": "s-fifo", "transcript_path": name,
                    "source": "startup"}
            assert daemon.post("claude-code", json.dumps(body).encode()) == 200
        neighbour = {"hook_event_name": "UserPromptSubmit", "session_id": "s-fifo", "prompt": "hi", "prompt_id": "p1"}
        assert daemon.post("claude-code", json.dumps(neighbour).encode()) == 200
        entries = daemon.wait_output(lambda es: any(e["event.name"] == "user.prompt" for e in es))
        daemon.wait_output(lambda es: daemon.status_file()["sources"]["claude-code:transcripts"].get(
            "refused_files", 0) >= 1 and daemon.status_file()["sources"]["claude-code:transcripts"].get(
            "refused_paths", 0) >= 2)
        assert daemon.get("/v1/status")
    finally:
        assert daemon.stop() == 0  # SIGTERM honoured: nothing is blocked on the FIFO
    assert_no_duplicates(entries)
    assert [e["event.name"] for e in entries if e["event.name"] not in ("session.status",)].count("user.prompt") == 1


def test_a_corrupt_sqlite_page_costs_only_the_rows_it_holds(tmp_path: Path) -> None:
    import asyncio
    import sqlite3

    from collector.sources.sqlite_rows import SqliteRows
    from collector.sources.sqlite_specs import TableSpec

    db = tmp_path / "agent.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA page_size=4096")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, wm INTEGER, body TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, 1000 + i, "x" * 300) for i in range(1, 1201)])
    conn.execute("CREATE INDEX t_wm ON t(wm)")  # after the rows: its pages come after the table's
    conn.commit()
    conn.close()
    data = bytearray(db.read_bytes())
    page = 40  # a leaf page of the table in the middle of the file (pages count from 1)
    data[(page - 1) * 4096 : page * 4096] = b"\x0d" + b"\xff" * 4095
    db.write_bytes(bytes(data))

    source = SqliteRows("a:db", "a", str(db), [TableSpec("t", "wm", "id")], {}, batch_rows=100)

    async def run() -> list[Any]:
        return [item async for item in source.read()]

    items = asyncio.run(run())
    ids = [r.data["row"]["id"] for r, _ in items if r is not None]
    lost = source.stats.extra.get("corrupt_rows", 0)
    assert 0 < lost < 30, "only the rows of the one damaged page are lost"
    assert len(ids) + lost == 1200 and ids == sorted(ids)
    assert items[-1][1].value["wm"] == 2200, "the position moved past the damage to the end"


def test_an_idle_poll_opens_no_unchanged_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from collector.sources import jsonl_files

    for n in range(5):
        (tmp_path / f"{n}.jsonl").write_bytes(b'{"n": %d}\n' % n)
    source = tailer(str(tmp_path / "*.jsonl"))
    assert len(read_all(source)[0]) == 5
    opened: list[str] = []
    real_open = jsonl_files.open_regular
    monkeypatch.setattr(jsonl_files, "open_regular", lambda p: opened.append(p) or real_open(p))
    assert read_all(source)[0] == [] and opened == []
    with (tmp_path / "3.jsonl").open("ab") as f:
        f.write(b'{"n": 33}\n')
    assert read_all(source)[0] == [{"n": 33}] and opened == [str(tmp_path / "3.jsonl")]


def test_a_bad_opencode_row_is_quarantined_and_counted_and_costs_only_itself(tmp_path: Path) -> None:
    """A row whose data is not JSON (a torn write, another version's format) used to vanish uncounted, and
    made the query of every message row it relates to fail (the message table was never read again)."""
    import shutil
    import sqlite3

    case = FIXTURES / "opencode" / "failing_command"
    clean = prepare_fixture(case, tmp_path / "clean")
    shutil.rmtree(clean.spool_dir)  # the database alone (the plugin's spool would give the same entries)
    collect_cli(clean)
    whole = Counter(e["event.name"] for e in read_output(clean.output_dir))
    paths = prepare_fixture(case, tmp_path / "bad")
    shutil.rmtree(paths.spool_dir)
    db = sqlite3.connect(paths.home / ".local" / "share" / "opencode" / "opencode.db")
    with db:
        [(part,)] = db.execute("SELECT id FROM part WHERE json_extract(data, '$.type') = 'tool'").fetchall()
        db.execute("UPDATE part SET data = '{\"type\": \"tool\", torn' WHERE id = ?", (part,))
    db.close()

    status = collect_cli(paths)

    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    lost = whole - Counter(e["event.name"] for e in entries)
    assert lost == Counter({"tool.call": 1, "tool.result": 1}), "only the row's own entries"
    assert status["sources"]["opencode:db"]["errors"] == 0, "the message rows that relate to it are still read"
    assert status["quarantine"]["by_source"] == {"opencode:sqlite": {"parse: the part row's data is not a JSON "
                                                                     "object": 1}}
