"""The spool is transit, not storage; outputs, quarantine and logs have retention: a committed spool file
goes after the grace (past days deleted, the daemon's own file of today emptied), never before its last
line is committed; old and oversized outputs, idle quarantine files and big logs go by the settings."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from support import FIXTURES, assert_no_duplicates, prepare_fixture, read_output

from collector.config import load_config
from collector.daemon.service import Service
from collector.paths import Paths
from collector.state import retention

CASE = FIXTURES / "claude-code" / "tool_then_answer"
DAY = 86400.0


def _prompt(session: str) -> dict[str, str]:
    return {"session_id": session, "hook_event_name": "UserPromptSubmit", "prompt_id": f"p-{session}",
            "prompt": "hello", "cwd": "/work/p"}


def _service(tmp_path: Path) -> Service:
    return _start(prepare_fixture(CASE, tmp_path))


def _start(paths: Paths) -> Service:
    service = Service(paths, load_config(paths.config_file, env={}), output_dir=paths.output_dir)
    service.startup()
    return service


def _cycle(service: Service) -> None:
    asyncio.run(service.collect_once())


def test_spool_is_emptied_once_committed_after_the_grace(tmp_path: Path) -> None:
    service = _service(tmp_path)
    spool = service.paths.spool_dir / "claude-code"
    try:
        past = next(spool.glob("claude-code-2026-11-30.jsonl"))  # the hook script's file of a past day
        os.utime(past)  # written just now (the fixture copy keeps the old time)
        service.spool_writer.append("claude-code", "UserPromptSubmit", _prompt("live-1"))
        (today,) = spool.glob("*.http.jsonl")  # the daemon's own file of today
        torn = spool / "claude-code-2026-11-29.jsonl"
        torn.write_text('{"ts": 1796037000.0, "agent": "claude-code", "event": "Stop", "payload": {"session_id"')
        _cycle(service)  # collects, commits, and housekeeps: still inside the grace
        first = read_output(service.output_dir)
        assert any(e.get("gen_ai.session.id") == "live-1" for e in first)
        assert first and past.exists() and today.stat().st_size > 0, "kept for the grace"
        service.housekeep(now=time.time() + service.config.retention.spool_grace_s + 1)
        assert not past.exists(), "every line committed: deleted"
        assert today.exists() and today.stat().st_size == 0, "the daemon's own file of today: emptied"
        assert torn.exists(), "a torn last line is not committed: the file stays"
        assert not [s for s in service._store.positions() if s.endswith(past.name)], "its position is forgotten"
        service.spool_writer.append("claude-code", "UserPromptSubmit", _prompt("live-2"))
        _cycle(service)
    finally:
        service.shutdown()
    entries = read_output(service.output_dir)
    assert_no_duplicates(entries)
    assert len(entries) > len(first), "a line written after the emptying is read"
    assert any(e.get("gen_ai.session.id") == "live-2" for e in entries)
    again = _start(service.paths)  # a restart re-reads nothing
    try:
        _cycle(again)
    finally:
        again.shutdown()
    assert len(read_output(again.output_dir)) == len(entries)


def test_no_raw_payload_stays_in_the_spool_after_commit(tmp_path: Path) -> None:
    service = _service(tmp_path)
    try:
        _cycle(service)
        service.housekeep(now=time.time() + DAY + service.config.retention.spool_grace_s)
    finally:
        service.shutdown()
    left = [p for p in service.paths.spool_dir.rglob("*.jsonl") if p.stat().st_size]
    assert left == []


def _touch(path: Path, size: int, age_days: float, now: float) -> None:
    path.write_bytes(b"x" * size)
    os.utime(path, (now - age_days * DAY, now - age_days * DAY))


def test_output_retention_by_days_and_by_size(tmp_path: Path) -> None:
    now = time.time()
    out = tmp_path / "output"
    out.mkdir()
    day = lambda ago: time.strftime("%Y-%m-%d", time.gmtime(now - ago * DAY))  # noqa: E731
    for ago in (120, 91, 89, 10, 1, 0):
        _touch(out / f"activity-{day(ago)}.jsonl", 1024 * 1024, ago, now)
    (out / "notes.txt").write_text("not ours to delete")
    removed = retention.prune_outputs(out, days=90, max_mb=0, now=now)
    assert sorted(p.name for p in removed) == [f"activity-{day(120)}.jsonl", f"activity-{day(91)}.jsonl"]
    removed = retention.prune_outputs(out, days=90, max_mb=2, now=now)
    assert sorted(p.name for p in removed) == [f"activity-{day(89)}.jsonl", f"activity-{day(10)}.jsonl"]
    assert sorted(p.name for p in out.iterdir()) == [f"activity-{day(1)}.jsonl", f"activity-{day(0)}.jsonl",
                                                     "notes.txt"]
    assert retention.prune_outputs(out, days=90, max_mb=1, now=now) == [out / f"activity-{day(1)}.jsonl"]
    assert retention.prune_outputs(out, days=0, max_mb=0, now=now) == [], "0: no limit"
    assert (out / f"activity-{day(0)}.jsonl").exists(), "today's file is never deleted"


def test_quarantine_and_log_retention(tmp_path: Path) -> None:
    now = time.time()
    q = tmp_path / "quarantine"
    q.mkdir()
    _touch(q / "quarantine.jsonl.1", 10, 40, now)
    _touch(q / "quarantine.jsonl", 10, 2, now)
    assert retention.prune_idle_files(sorted(q.glob("*.jsonl*")), 30, now) == [q / "quarantine.jsonl.1"]
    logs = tmp_path / "log"
    logs.mkdir()
    big = logs / "agent-collector.log"
    big.write_bytes(b"line\n" * (300 * 1024))  # 1.5 MB
    _touch(logs / "agent-collector.log.2", 10, 20, now)
    changed = retention.cap_logs(logs, max_mb=1, days=14, now=now)
    assert big in changed and logs / "agent-collector.log.2" in changed
    assert big.stat().st_size == 0 and (logs / "agent-collector.log.1").stat().st_size == 300 * 1024 * 5
    assert oct((logs / "agent-collector.log.1").stat().st_mode & 0o777) == "0o600"


def test_retention_settings_are_typed(tmp_path: Path) -> None:
    config = load_config(tmp_path / "none.toml", env={"AGENT_COLLECTOR_RETENTION__OUTPUT_DAYS": "7",
                                                      "AGENT_COLLECTOR_RETENTION__SPOOL_GRACE_S": "30"})
    assert config.retention.output_days == 7 and config.retention.spool_grace_s == 30.0
    assert config.retention.log_max_mb == 50 and config.retention.quarantine_days == 30
    text = json.dumps(config.as_dict()["retention"])
    assert "output_max_mb" in text


HOOK = Path(__file__).resolve().parents[2] / "hooks" / "agent-collector-hook.sh"


def _hook(spool_dir: Path, session: str) -> None:
    """The real hook script appends one line to the spool file of today (lock-free, O_APPEND)."""
    subprocess.run(["bash", str(HOOK), "claude-code", "UserPromptSubmit", str(spool_dir)],
                   input=json.dumps(_prompt(session)).encode(), check=True, timeout=30,
                   env={**os.environ, "HOME": str(spool_dir.parent)})


def _hook_line(tmp_path: Path, session: str) -> bytes:
    """The exact line the hook script writes, for a writer that opened the file before a rename."""
    aside = tmp_path / "aside"
    _hook(aside, session)
    (line,) = (aside / "claude-code").glob("*.jsonl")
    return line.read_bytes()


def _sessions(service: Service) -> list[str]:
    return [e["gen_ai.session.id"] for e in read_output(service.output_dir)
            if e.get("event.name") == "user.prompt" and str(e.get("gen_ai.session.id", "")).startswith("t-")]


def _spool_holds(service: Service, text: str) -> list[Path]:
    return [p for p in service.paths.spool_dir.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_hook_script_file_of_today_goes_once_committed_and_quiet(tmp_path: Path) -> None:
    service = _service(tmp_path)
    spool = service.paths.spool_dir / "claude-code"
    day_file = spool / f"claude-code-{time.strftime('%Y-%m-%d', time.gmtime())}.jsonl"
    grace = service.config.retention.spool_grace_s
    try:
        _hook(service.paths.spool_dir, "t-1")
        _hook(service.paths.spool_dir, "t-2")
        _cycle(service)
        assert day_file.exists(), "inside the grace: kept"
        service.housekeep(now=time.time() + grace + 1)
        swept = day_file.with_name(day_file.name + retention.SWEPT)
        assert not day_file.exists() and swept.exists(), "committed and quiet: renamed aside first"
        service.housekeep(now=time.time() + 2 * grace + 2)
        assert not swept.exists() and _spool_holds(service, "t-1") == [], "then deleted: no raw payload left"
        assert not [s for s in service._store.positions() if s.endswith(day_file.name)], "its position forgotten"
        _hook(service.paths.spool_dir, "t-3")  # a new hook creates a fresh day file, read from its start
        _cycle(service)
        assert day_file.exists()
    finally:
        service.shutdown()
    assert sorted(_sessions(service)) == ["t-1", "t-2", "t-3"], "every line exported exactly once"
    assert_no_duplicates(read_output(service.output_dir))
    again = _start(service.paths)  # a restart re-reads nothing
    try:
        _cycle(again)
    finally:
        again.shutdown()
    assert sorted(_sessions(again)) == ["t-1", "t-2", "t-3"]


@pytest.mark.parametrize("new_day_file", [False, True], ids=["name-free", "new-day-file"])
def test_a_hook_that_opened_the_file_before_the_rename_loses_nothing(tmp_path: Path, new_day_file: bool) -> None:
    late = _hook_line(tmp_path, "t-late")
    service = _service(tmp_path)
    spool = service.paths.spool_dir / "claude-code"
    day_file = spool / f"claude-code-{time.strftime('%Y-%m-%d', time.gmtime())}.jsonl"
    swept = day_file.with_name(day_file.name + retention.SWEPT)
    grace = service.config.retention.spool_grace_s
    try:
        _hook(service.paths.spool_dir, "t-early")
        _cycle(service)
        fd = os.open(day_file, os.O_WRONLY | os.O_APPEND)  # a hook opened the day file ...
        try:
            service.housekeep(now=time.time() + grace + 1)  # ... the sweep renames it aside ...
            assert swept.exists() and not day_file.exists()
            os.write(fd, late)  # ... and the hook writes its line (one write) into the renamed file
        finally:
            os.close(fd)
        if new_day_file:
            _hook(service.paths.spool_dir, "t-next")  # the tailer sees a new inode: reads the old one first
            service.housekeep(now=time.time() + 2 * grace + 2)  # before it does: the sweep leaves both alone
            assert swept.exists() and day_file.exists()
        _cycle(service)
        for step in range(2, 6):  # settle: put back or delete, rename aside again, delete
            service.housekeep(now=time.time() + step * (grace + 1))
            _cycle(service)
            service.housekeep(now=time.time() + step * (grace + 1) + 0.5)
    finally:
        service.shutdown()
    expected = ["t-early", "t-late"] + (["t-next"] if new_day_file else [])
    assert sorted(_sessions(service)) == sorted(expected), "nothing lost, nothing doubled"
    assert_no_duplicates(read_output(service.output_dir))
    assert not swept.exists() and _spool_holds(service, "t-late") == [], "and the spool emptied after all"


def test_the_default_grace_is_short(tmp_path: Path) -> None:
    """Issue 22 item 6 / 23 item 8: raw payloads leave the spool within about a minute of their commit
    (housekeeping runs every HOUSEKEEP_EVERY_S), not ten."""
    from collector.daemon.housekeeping import HOUSEKEEP_EVERY_S

    config = load_config(tmp_path / "absent.toml", env={})
    assert config.retention.spool_grace_s == 60.0
    assert config.retention.spool_grace_s + HOUSEKEEP_EVERY_S <= 120.0


def test_only_streams_named_under_the_spool_are_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spool = tmp_path / "data" / "spool"
    (spool / "claude-code").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "data")
    inside = spool / "claude-code" / "claude-code-2026-11-30.jsonl"
    via_link = tmp_path / "link" / "spool" / "claude-code" / "claude-code-2026-11-29.jsonl"
    transcripts = [tmp_path / "home" / "p" / f"{n}.jsonl" for n in range(50)]
    positions = {f"claude-code:spool:{inside}": {"offset": 1}, f"claude-code:spool:{via_link}": {"offset": 2}}
    positions |= {f"claude-code:transcripts:{p}": {"offset": 3} for p in transcripts}
    resolved: list[str] = []
    real = os.path.realpath
    monkeypatch.setattr(os.path, "realpath", lambda p, *a, **k: resolved.append(os.fspath(p)) or real(p, *a, **k))
    assert set(retention._spool_streams(positions, spool)) == {str(inside)}  # via the link: not as we spell it
    assert not [p for p in resolved if "/home/" in p]  # an agent's transcripts are not resolved
    link_spool = tmp_path / "link" / "spool"
    assert set(retention._spool_streams(positions, link_spool)) == {str(inside), str(via_link)}
