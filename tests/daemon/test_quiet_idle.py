"""Quiet when idle: our own reads of an agent's SQLite database wake nothing, an unchanged database is not
queried, and status.json is rewritten only when it changed."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path

import watchfiles
from support import FIXTURES, prepare_fixture
from support.sqlite import SPEC, make_db, read, rows, traced

from collector.config import load_config
from collector.daemon.service import Service
from collector.daemon.status_file import CYCLES_EVERY_S, StatusFile
from collector.daemon.wake_filter import WakeFilter
from collector.sources.sqlite_rows import SqliteRows


def _age(*paths: Path) -> None:
    old = time.time() - 10
    for p in paths:
        os.utime(p, (old, old))


def test_the_filter_ignores_shm_and_journal_and_an_unchanged_wal(tmp_path: Path) -> None:
    wal = tmp_path / "a.db-wal"
    wal.write_bytes(b"x")
    wake = WakeFilter()
    assert wake(watchfiles.Change.modified, str(wal))  # first sight, written just now
    wake = WakeFilter()
    _age(wal)
    assert not wake(watchfiles.Change.modified, str(wal))  # first sight, unchanged for long: a read
    assert not wake(watchfiles.Change.modified, str(tmp_path / "a.db-shm"))
    assert not wake(watchfiles.Change.added, str(tmp_path / "a.db-journal"))
    assert not wake(watchfiles.Change.modified, str(wal))  # nothing moved: our read
    wal.write_bytes(b"xy")
    assert wake(watchfiles.Change.modified, str(wal))  # the agent committed
    assert wake(watchfiles.Change.modified, str(tmp_path / "a.db"))
    assert wake(watchfiles.Change.added, str(tmp_path / "rollout.jsonl"))


def test_our_reads_cause_no_wake_up_and_the_agents_write_does(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    writer = make_db(db)
    writer.executemany("INSERT INTO item VALUES (?, ?, ?)", [(f"r{i}", i, "x") for i in range(20)])
    source = SqliteRows("s", "a", str(db), SPEC, {})
    assert len(rows(read(source))) == 20
    _age(db, Path(f"{db}-wal"))
    seen: list[set[tuple[watchfiles.Change, str]]] = []
    stop = threading.Event()
    ready = threading.Event()

    def watch() -> None:
        for changes in watchfiles.watch(tmp_path, watch_filter=WakeFilter(), stop_event=stop, rust_timeout=100,
                                        yield_on_timeout=True, debounce=10, step=5):
            ready.set()
            if changes:
                seen.append(changes)

    thread = threading.Thread(target=watch)
    thread.start()
    try:
        assert ready.wait(10)
        for _ in range(3):
            assert read(source) == []  # a read of everything, nothing new
        time.sleep(0.5)  # events of those reads, if any, have arrived (this waits; it does not time)
        ours = [c for c in seen for _, path in c]
        writer.execute("INSERT INTO item VALUES ('late', 100, 'y')")
        deadline = time.monotonic() + 10
        while not seen[len(ours):] and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(10)
        writer.close()
    assert ours == []
    assert any(path.endswith("a.db-wal") for c in seen for _, path in c)


def test_an_unchanged_database_is_not_queried(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    writer = make_db(db)
    writer.executemany("INSERT INTO item VALUES (?, ?, ?)", [(f"r{i}", i, "x") for i in range(20)])
    _age(db, Path(f"{db}-wal"))
    source = traced(db, SPEC)
    assert len(rows(read(source))) == 20
    source.statements.clear()
    assert read(source) == []
    assert source.statements == []  # not even opened
    writer.execute("INSERT INTO item VALUES ('late', 100, 'y')")  # the -wal grows
    assert rows(read(source)) == [("late", 100)]
    writer.close()


def test_status_json_is_rewritten_only_when_it_changed(tmp_path: Path) -> None:
    paths = prepare_fixture(FIXTURES / "claude-code" / "tool_then_answer", tmp_path)
    service = Service(paths, load_config(paths.config_file, env={}), output_dir=paths.output_dir)
    service.startup()
    try:
        asyncio.run(service.collect_once())
        status = paths.state_dir / "status.json"
        first = status.stat().st_ino
        for _ in range(3):
            service._status_file.at -= 10  # as if the once-a-second limit had passed
            asyncio.run(service.collect_once())
        assert status.stat().st_ino == first  # an atomic rewrite would be a new file
    finally:
        service.shutdown()


def test_a_cycle_count_alone_is_written_every_30_s_a_change_at_once(tmp_path: Path) -> None:
    now = [100.0]
    status = StatusFile(tmp_path / "status.json", clock=lambda: now[0])

    def write(cycles: int, entries: int = 1, force: bool = False) -> int:
        status.write({"updated": now[0], "cycles": cycles, "pipeline": {"entries": entries}}, force)
        return json.loads(status.path.read_text())["cycles"]

    assert write(1) == 1
    now[0] += 5
    assert write(2) == 1 and write(3) == 1 and not status.held  # an idle daemon's polls: no write, no fsync
    now[0] += CYCLES_EVERY_S
    assert write(17) == 17  # but the counter still moves in the file
    now[0] += 0.5
    assert write(18, entries=2) == 17 and status.held  # a change within the once-a-second limit waits
    now[0] += 1
    assert write(19, entries=2) == 19 and not status.held
    assert write(20, force=True, entries=2) == 20  # forced (the daemon stops): the count as it is
