"""State that can be rebuilt is rebuilt: a corrupt checkpoint database is moved aside and rebuilt from the
event ids in the JSONL output (nothing duplicated, nothing lost, status says so); the idle-timeout tracker
and the session status survive a restart (kept with the checkpoints)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, assert_no_duplicates, collect, make_paths, prepare_fixture, read_output
from support.robust import Daemon

from collector.config import load_config
from collector.daemon.service import Service
from collector.paths import Paths

CASE = FIXTURES / "claude-code" / "tool_then_answer"


def corrupt(db: Path, how: str) -> None:
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    if how == "garbage":
        db.write_bytes(b"this is not a database " * 500)
    else:  # a torn page in the middle of a real database
        data = bytearray(db.read_bytes())
        page = int.from_bytes(data[16:18], "big")  # the page size, from the file's header
        assert len(data) >= 3 * page, "the database must have pages past the header"
        data[page : 2 * page] = b"\xff" * page
        db.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["garbage", "torn_page"])
def test_a_corrupt_checkpoint_database_is_rebuilt_from_the_output(tmp_path: Path, how: str) -> None:
    paths = prepare_fixture(CASE, tmp_path)
    first = collect(paths)
    assert first
    db = paths.state_dir / "checkpoints.sqlite"
    corrupt(db, how)

    again = collect(paths)  # every source is read again from the start: the rebuilt ids drop it all

    assert_no_duplicates(again)
    assert sorted(e["event.id"] for e in again) == sorted(e["event.id"] for e in first)
    [moved] = list(paths.state_dir.glob("checkpoints.sqlite.corrupt-*"))
    assert moved.stat().st_size > 0
    status = json.loads((paths.state_dir / "status.json").read_text())
    rebuilt = status["state_rebuilt"]
    assert rebuilt["delivered_ids"] == len(first) and rebuilt["moved_to"] == str(moved)
    assert rebuilt["reason"]
    assert collect(paths) == again  # and the new database works: a third run changes nothing


def test_the_daemon_starts_on_a_corrupt_database_and_duplicates_nothing(tmp_path: Path) -> None:
    prepare_fixture(CASE, tmp_path)
    daemon = Daemon(tmp_path, {"AGENT_COLLECTOR_INGEST__ENABLED": "false"})
    expected = sum(json.loads((CASE / "expected.json").read_text())["counts"].values())
    daemon.start_quiet()
    try:
        daemon.wait_output(lambda es: len(es) >= expected)
    finally:
        assert daemon.stop() == 0
    written = sorted(e["event.id"] for e in read_output(daemon.out))
    corrupt(daemon.data / "state" / "checkpoints.sqlite", "garbage")
    daemon.start_quiet()
    try:
        daemon.wait_output(lambda es: (daemon.status_file().get("state_rebuilt") or {}).get("delivered_ids")
                           == expected and daemon.status_file()["sources"]["claude-code:transcripts"]["records"] > 0)
    finally:
        assert daemon.stop() == 0
    entries = read_output(daemon.out)
    assert_no_duplicates(entries)
    assert sorted(e["event.id"] for e in entries) == written


def qwen_paths(tmp: Path, idle_s: float) -> tuple[Paths, Any]:
    paths = make_paths(tmp)
    paths.home.mkdir(parents=True, exist_ok=True)
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(f'[agents."qwen-code"]\nidle_timeout_s = {idle_s}\n')
    return paths, load_config(paths.config_file, env={})


def run_once(paths: Paths, config: Any) -> None:
    service = Service(paths, config, output_dir=paths.output_dir)
    service.startup()
    try:
        asyncio.run(service.collect_once())
    finally:
        service.shutdown()


def test_a_session_waiting_for_its_idle_timeout_survives_a_restart(tmp_path: Path) -> None:
    paths, config = qwen_paths(tmp_path, 3600)
    spool = paths.spool_dir / "qwen-code"
    spool.mkdir(parents=True)
    now = time.time()
    lines = [{"ts": now - 5, "agent": "qwen-code", "event": "SessionStart",
              "payload": {"session_id": "q1", "hook_event_name": "SessionStart", "source": "startup"}},
             {"ts": now - 4, "agent": "qwen-code", "event": "UserPromptSubmit",
              "payload": {"session_id": "q1", "hook_event_name": "UserPromptSubmit", "prompt": "hi"}}]
    (spool / "qwen-code-2026-12-01.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    run_once(paths, config)
    assert not [e for e in read_output(paths.output_dir) if e["event.name"] == "session.end"]

    paths, config = qwen_paths(tmp_path, 1)  # a new process, and now the session has been idle too long
    run_once(paths, config)

    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    [end] = [e for e in entries if e["event.name"] == "session.end"]
    assert (end["gen_ai.session.id"], end["session.reason"]) == ("q1", "idle_timeout")
    statuses = [e["session.status"] for e in entries if e["event.name"] == "session.status"]
    assert statuses[-1] == "closed"
    run_once(paths, config)  # closed sessions are not kept: nothing more
    assert len(read_output(paths.output_dir)) == len(entries)


def test_the_live_status_of_an_open_session_survives_a_restart(tmp_path: Path) -> None:
    from collector.pipeline.status import SessionStatusTracker

    paths = prepare_fixture(FIXTURES / "qwen-code" / "tool_then_answer", tmp_path)
    spool = next((paths.spool_dir / "qwen-code").glob("*.jsonl"))
    kept = [x for x in spool.read_text().splitlines() if '"SessionEnd"' not in x and '"Stop"' not in x]
    spool.write_text("\n".join(kept) + "\n")
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text('[agents."qwen-code"]\nidle_timeout_s = 31536000\n')
    config = load_config(paths.config_file, env={})
    service = Service(paths, config, output_dir=paths.output_dir)
    service.startup()
    try:
        asyncio.run(service.collect_once())
        assert service.status is not None
        before = service.status.sessions()
    finally:
        service.shutdown()
    assert before and before[0]["status"] != "closed"
    again = Service(paths, config, output_dir=paths.output_dir)
    again.startup()
    try:
        assert isinstance(again.status, SessionStatusTracker)
        assert again.status.sessions() == before
    finally:
        again.shutdown()
