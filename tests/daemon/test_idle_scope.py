"""A daemon cycle touches only what changed: file events name the files it reads, the safety-net sweep
lists only folders whose mtime moved and stats a share of the files in turns, and without file events
every poll reads every file. Real files and real file-system events throughout; the daemon tests run
`agent-collector run`."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import make_paths, read_output
from support.robust import Daemon, wait_status

from collector.config import load_config
from collector.daemon.service import Service
from collector.sources import file_index
from collector.sources.base import Scope
from collector.sources.file_index import GlobIndex
from collector.sources.json_documents import JsonDocuments
from collector.sources.jsonl_files import JsonlFiles

FIXTURE = next((Path(__file__).parent.parent / "fixtures" / "claude-code" / "two_turns_resume").glob(
    "home/.claude/projects/*/*.jsonl"))
TEMPLATE = FIXTURE.read_text().splitlines()
TEMPLATE_SID = "a7a23fa5-70fc-47f7-bf72-272ad5889def"
QUIET = {"AGENT_COLLECTOR_INGEST__ENABLED": "false", "AGENT_COLLECTOR_WATCHDOG__ENABLED": "false"}


def transcript(sid: str, start: int = 0, end: int = 6) -> str:
    """Lines ``start:end`` of a real Claude Code transcript, as session ``sid``."""
    return "".join(line.replace(TEMPLATE_SID, sid) + "\n" for line in TEMPLATE[start:end])


def _age(*paths: Path) -> None:
    """Folders changed long ago: their listing is trusted (``file_index.RACY_NS``)."""
    old = time.time() - 60
    for p in paths:
        os.utime(p, (old, old))


def _home(root: Path, count: int) -> dict[str, Path]:
    """``count`` transcripts in folders of 25, as Claude Code lays them out; sid -> file."""
    files = {}
    for n in range(count):
        folder = root / ".claude" / "projects" / f"-tmp-p{n // 25}"
        folder.mkdir(parents=True, exist_ok=True)
        sid = str(uuid.uuid4())
        files[sid] = folder / f"{sid}.jsonl"
        files[sid].write_text(transcript(sid))
    return files


def _read(source: Any, scope: Scope | None = None) -> list[dict[str, Any]]:
    async def run() -> list[dict[str, Any]]:
        source.narrow(scope)
        return [r.data async for r, _ in source.read() if r is not None]

    return asyncio.run(run())


def _sessions(records: list[dict[str, Any]]) -> Counter[str]:
    return Counter(r.get("sessionId") for r in records)


@pytest.fixture
def stats(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Which paths were stat-ed (the idle cost is one stat per file looked at)."""
    calls: Counter[str] = Counter()
    real = os.stat

    def counting(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        calls[os.fspath(path)] += 1
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counting)
    yield calls


# -- the file index ------------------------------------------------------------------------------


def test_the_index_lists_what_glob_lists_and_relists_only_folders_that_moved(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import glob

    files = _home(tmp_path, 60)
    (tmp_path / ".claude" / "projects" / "-tmp-p0" / ".hidden.jsonl").write_text("{}\n")
    (tmp_path / ".claude" / "projects" / "-tmp-p1" / "notes.txt").write_text("x")
    pattern = str(tmp_path / ".claude" / "projects" / "*" / "*.jsonl")
    index = GlobIndex([pattern])
    assert index.files() == set(glob.glob(pattern)) == {str(p) for p in files.values()}
    assert all(index.matches(p) for p in glob.glob(pattern))
    assert not index.matches(str(tmp_path / ".claude" / "projects" / "-tmp-p0" / ".hidden.jsonl"))
    _age(tmp_path / ".claude" / "projects", *{p.parent for p in files.values()})
    listed: list[str] = []
    real = file_index._list
    monkeypatch.setattr(file_index, "_list", lambda folder, segment: listed.append(folder) or real(folder, segment))
    index.files()
    index.files()  # the folders' listings are trusted now
    listed.clear()
    before = index.version
    assert len(index.files()) == 60 and listed == [] and index.version == before
    new = tmp_path / ".claude" / "projects" / "-tmp-p1" / "new.jsonl"
    new.write_text(transcript("new"))
    assert str(new) in index.files()
    assert listed == [str(new.parent)] and index.version == before + 1  # only the folder that moved


# -- a source under a scope ----------------------------------------------------------------------


def test_a_cycle_reads_the_files_events_named_and_stats_nothing_else(tmp_path: Path, stats: Counter[str]) -> None:
    files = _home(tmp_path, 50)
    source = JsonlFiles("claude-code:transcripts", "claude-code", "transcript",
                        [str(tmp_path / ".claude" / "projects" / "*" / "*.jsonl")], {})
    assert len(_sessions(_read(source))) == 50
    one, two, three = list(files)[7], list(files)[21], list(files)[40]
    for sid in (one, two, three):
        with files[sid].open("a") as f:
            f.write(transcript(sid, 6, 10))
    stats.clear()
    assert _sessions(_read(source, Scope(frozenset({str(files[one])}), sweep=0.0))) == {one: 4}
    assert {p for p in stats if p.endswith(".jsonl")} == {str(files[one])}
    assert _read(source, Scope(frozenset(), sweep=0.0)) == []  # no event, no sweep due: nothing looked at
    # the sweep: half the files each time, so the two appends no event named are read within two sweeps
    picked = _sessions(_read(source, Scope(frozenset(), sweep=0.5)) + _read(source, Scope(frozenset(), sweep=0.5)))
    assert picked == {two: 4, three: 4}


def test_a_new_file_is_read_when_its_event_names_it_or_the_sweep_lists_its_folder(tmp_path: Path) -> None:
    files = _home(tmp_path, 30)
    source = JsonlFiles("claude-code:transcripts", "claude-code", "transcript",
                        [str(tmp_path / ".claude" / "projects" / "*" / "*.jsonl")], {})
    _read(source)
    folder = next(iter(files.values())).parent
    named = folder / "named.jsonl"
    named.write_text(transcript("named"))
    assert _sessions(_read(source, Scope(frozenset({str(named)}), sweep=0.0))) == {"named": 6}
    fresh = tmp_path / ".claude" / "projects" / "-tmp-new-folder"
    fresh.mkdir()
    (fresh / "s.jsonl").write_text(transcript("in-a-new-folder"))
    # the event named only the folder (the file came before its watch): that folder is listed
    assert _sessions(_read(source, Scope(frozenset({str(fresh)}), sweep=0.0))) == {"in-a-new-folder": 6}
    unseen = folder / "unseen.jsonl"
    unseen.write_text(transcript("unseen"))
    assert _read(source, Scope(frozenset(), sweep=0.0)) == []
    # found by the next sweep: the folder's listing is too close to its mtime to be trusted yet
    assert _sessions(_read(source, Scope(frozenset(), sweep=0.01))) == {"unseen": 6}


def test_the_sweep_looks_at_the_folders_once_per_turn_and_so_finds_a_file_whose_event_was_lost(
        tmp_path: Path, stats: Counter[str]) -> None:
    files = _home(tmp_path, 100)  # four folders of 25
    folders = sorted({p.parent for p in files.values()})
    source = JsonlFiles("claude-code:transcripts", "claude-code", "transcript",
                        [str(tmp_path / ".claude" / "projects" / "*" / "*.jsonl")], {})
    _read(source)
    _age(tmp_path / ".claude" / "projects", *folders)
    _read(source, Scope(frozenset(), sweep=0.25))  # the first sweep lists the folders again: trusted now
    unseen = folders[1] / "unseen.jsonl"
    unseen.write_text(transcript("unseen"))  # its event was lost
    stats.clear()
    found = [_sessions(_read(source, Scope(frozenset(), sweep=0.25))) for _ in range(4)]
    assert found == [Counter(), Counter(), Counter(), Counter({"unseen": 6})]
    assert [stats[str(f)] for f in folders] == [1, 1, 1, 1]  # each folder stat-ed once in the turn, not per sweep
    assert {str(p) for p in files.values()} <= set(stats)  # and every file in the turn's slices


def test_a_hook_named_path_is_read_at_the_next_cycle_without_an_event(tmp_path: Path) -> None:
    files = _home(tmp_path, 3)
    pattern = str(tmp_path / ".claude" / "projects" / "*" / "*.jsonl")
    source = JsonlFiles("claude-code:transcripts", "claude-code", "transcript", [pattern], {})
    _read(source)
    later = next(iter(files.values())).parent / "later.jsonl"
    later.write_text(transcript("later"))
    assert source.add_path(str(later))
    assert _sessions(_read(source, Scope(frozenset(), sweep=0.0))) == {"later": 6}


def test_json_documents_read_only_the_named_document(tmp_path: Path, stats: Counter[str]) -> None:
    folder = tmp_path / "chats"
    folder.mkdir()
    for n in range(20):
        (folder / f"session-{n}.json").write_text(f'{{"sessionId": "s{n}", "messages": []}}')
    source = JsonDocuments("gemini-cli:checkpoints", "gemini-cli", [str(folder / "session-*.json")], {})
    assert len(_read(source)) == 20
    (folder / "session-3.json").write_text('{"sessionId": "s3", "messages": [{"text": "more"}]}')
    (folder / "session-9.json").write_text('{"sessionId": "s9", "messages": [{"text": "more"}]}')
    stats.clear()
    assert [r["sessionId"] for r in _read(source, Scope(frozenset({str(folder / "session-3.json")}), 0.0))] == ["s3"]
    assert {p for p in stats if p.endswith(".json")} == {str(folder / "session-3.json")}
    assert [r["sessionId"] for r in _read(source, Scope(frozenset(), 1.0))] == ["s9"]


# -- the service: what a cycle looks at ----------------------------------------------------------


def test_without_file_events_every_poll_reads_every_file_and_with_them_only_the_sweep_finds_a_lost_one(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    files = _home(home, 10)
    paths = make_paths(tmp_path, home)
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text("[collector]\npoll_interval_s = 1.0\nrescan_s = 1.0\n")
    service = Service(paths, load_config(paths.config_file, env={}), output_dir=paths.output_dir)
    service.startup()
    sid = next(iter(files))
    source = next(s for s in service.sources if s.name == "claude-code:transcripts")

    def append_and_cycle() -> int:
        with files[sid].open("a") as f:
            f.write(transcript(sid, 6, 8))
        asyncio.run(service._cycle())
        return source.stats.bytes  # bytes read (lines that make no entry are no records, but are read)

    def size() -> int:
        return sum(p.stat().st_size for p in files.values())

    try:
        asyncio.run(service._cycle())  # the first cycle reads everything
        assert source.stats.bytes == size() and not service._files.changes.watching
        assert append_and_cycle() == size()  # no file events: the poll reads every file
        service._files.changes.watch(True)
        asyncio.run(service._cycle())  # the watch came up: one cycle reads everything
        service._files.swept_at = time.monotonic()  # a sweep just ran; this change's event was lost
        assert append_and_cycle() < size()
        service._files.swept_at -= 5  # the poll interval passed: the sweep (rescan_s = the interval: all files)
        asyncio.run(service._cycle())
        assert source.stats.bytes == size()
    finally:
        service.shutdown()


# -- the daemon ----------------------------------------------------------------------------------


def _count(daemon: Daemon, sid: str) -> int:
    return sum(1 for e in read_output(daemon.out) if e.get("gen_ai.session.id") == sid) if daemon.out.exists() else 0


def _wait_more(daemon: Daemon, sid: str, than: int) -> None:
    daemon.wait_output(lambda entries: sum(1 for e in entries if e.get("gen_ai.session.id") == sid) > than, 60)


def test_the_daemon_picks_up_changes_among_many_files_by_their_events(tmp_path: Path) -> None:
    """The poll is an hour apart: what the daemon reads after its start, only file events told it."""
    files = _home(tmp_path / "home", 200)
    daemon = Daemon(tmp_path, {**QUIET, "AGENT_COLLECTOR_COLLECTOR__POLL_INTERVAL_S": "3600",
                               "AGENT_COLLECTOR_COLLECTOR__RESCAN_S": "86400"})
    sids = list(files)
    try:
        daemon.start_quiet()
        daemon.wait_output(lambda entries: {e.get("gen_ai.session.id") for e in entries} >= set(sids), 120)
        for sid in (sids[17], sids[150]):  # an append to one of many files
            seen = _count(daemon, sid)
            with files[sid].open("a") as f:
                f.write(transcript(sid, 6, 52))
            _wait_more(daemon, sid, seen)
        new = files[sids[0]].parent / "brand-new.jsonl"  # a new file in a watched folder
        new.write_text(transcript("brand-new-session"))
        _wait_more(daemon, "brand-new-session", 0)
        folder = tmp_path / "home" / ".claude" / "projects" / "-tmp-a-new-project"  # and in a new folder
        folder.mkdir()
        (folder / "s.jsonl").write_text(transcript("new-project-session"))
        _wait_more(daemon, "new-project-session", 0)
        rotated = files[sids[60]]  # rotation: renamed aside, a new file at the name
        rotated.rename(rotated.with_name(rotated.name + ".1"))
        rotated.write_text(transcript("after-rotation"))
        _wait_more(daemon, "after-rotation", 0)
        truncated = files[sids[90]]  # truncated and written again
        truncated.write_text(transcript("after-truncation"))
        _wait_more(daemon, "after-truncation", 0)
    finally:
        assert daemon.stop() == 0
    status = daemon.status_file()["sources"]["claude-code:transcripts"]
    assert status["rotations"] >= 1 and status["truncations"] >= 1


def test_the_daemon_polls_every_file_when_file_events_are_unavailable(tmp_path: Path) -> None:
    """A watcher that cannot start (inotify limits reached): the poll alone picks the change up."""
    fake = tmp_path / "fake-watchfiles" / "watchfiles"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "async def awatch(*args, **kwargs):\n"
        "    raise OSError(28, 'inotify watch limit reached')\n"
        "    yield set()\n")
    files = _home(tmp_path / "home", 20)
    daemon = Daemon(tmp_path, {**QUIET, "PYTHONPATH": str(fake.parent),
                               "AGENT_COLLECTOR_COLLECTOR__POLL_INTERVAL_S": "0.3",
                               "AGENT_COLLECTOR_COLLECTOR__RESCAN_S": "86400"})
    sid = list(files)[11]
    try:
        daemon.start_quiet()
        daemon.wait_output(lambda entries: {e.get("gen_ai.session.id") for e in entries} >= set(files), 120)
        seen = _count(daemon, sid)
        with files[sid].open("a") as f:
            f.write(transcript(sid, 6, 52))
        _wait_more(daemon, sid, seen)
    finally:
        assert daemon.stop() == 0
    assert "file events unavailable" in daemon.log()


def test_the_change_set_hands_over_paths_and_says_when_to_read_everything() -> None:
    from collector.daemon.change_set import MAX_PATHS, ChangeSet

    changes = ChangeSet()
    changes.add(["/a"])
    assert changes.take() == (frozenset(), True)  # the first cycle reads every file
    changes.watch(True)
    assert changes.take() == (frozenset(), True)  # the watch came up: what came before it
    changes.add(["/a", "/b"])
    changes.add(["/a"])
    assert changes.take() == (frozenset({"/a", "/b"}), False)
    assert changes.take() == (frozenset(), False)
    changes.add(f"/f{n}" for n in range(MAX_PATHS + 1))  # a burst: walked, not listed
    assert changes.take() == (frozenset(), True)
    changes.add(["/c"])
    changes.everything()  # a cycle stopped early
    assert changes.take() == (frozenset(), True)
    changes.watch(False)
    assert not changes.watching


def test_status_says_caught_up_once_the_backlog_is_read(tmp_path: Path) -> None:
    """What a benchmark of the idle daemon waits on: ``caught_up`` once a whole cycle read nothing new and
    file events name what comes next; by then every file was read."""
    files = _home(tmp_path / "home", 120)
    daemon = Daemon(tmp_path, {**QUIET, "AGENT_COLLECTOR_COLLECTOR__POLL_INTERVAL_S": "0.5"})
    try:
        daemon.start_quiet()
        status = wait_status(daemon, lambda s: s.get("caught_up") is True, timeout=120)
        assert {e.get("gen_ai.session.id") for e in read_output(daemon.out)} >= set(files)
        assert status["sources"]["claude-code:transcripts"]["bytes"] == sum(p.stat().st_size for p in files.values())
    finally:
        assert daemon.stop() == 0, daemon.log()[-3000:]
