"""Sessions that never say goodbye (Qwen Code in -p mode, `opencode run`) are closed by the idle rule."""

from __future__ import annotations

from pathlib import Path

from support import FIXTURES, assert_no_duplicates, builtin_tracker, collect, prepare_fixture

from collector.model import RawRecord

SECOND = 1_000_000_000
T0 = 1_796_037_000 * SECOND


def hook(event: str, at: int, **payload: object) -> RawRecord:
    body = {"session_id": "s1", "hook_event_name": event, **payload}
    data = {"ts": at / SECOND, "agent": "qwen-code", "event": event, "payload": body}
    return RawRecord("qwen-code", "hook", data, "spool", str(at), at)


def test_idle_sessions_close_once_at_last_event_plus_timeout() -> None:
    tracker = builtin_tracker()
    tracker.observe_record(hook("SessionStart", T0, source="startup"))
    tracker.observe_record(hook("UserPromptSubmit", T0 + SECOND, prompt="hi", prompt_id="p1"))
    timeout = {"qwen-code": 60 * SECOND}.get
    assert tracker.expire(T0 + 30 * SECOND, timeout) == [], "not idle long enough"
    assert tracker.expire(T0 + 3600 * SECOND, lambda agent: None) == [], "agents without a timeout say goodbye"
    closed = tracker.expire(T0 + 3600 * SECOND, timeout)
    assert [e["event.name"] for e in closed] == ["session.end", "session.status"]
    end, status = closed
    assert end["session.reason"] == "idle_timeout" and end["time_unix_nano"] == T0 + 61 * SECOND
    assert status["session.status"] == "closed" and status["session.previous_status"] == "running"
    assert tracker.expire(T0 + 7200 * SECOND, timeout) == [], "closed once"
    again = builtin_tracker()  # a replay after a restart reaches the same ids
    again.observe_record(hook("SessionStart", T0, source="startup"))
    again.observe_record(hook("UserPromptSubmit", T0 + SECOND, prompt="hi", prompt_id="p1"))
    assert [e["event.id"] for e in again.expire(T0 + 9999 * SECOND, timeout)] == [e["event.id"] for e in closed]


def test_backfill_closes_old_sessions_and_a_second_pass_adds_nothing(tmp_path: Path) -> None:
    paths = prepare_fixture(FIXTURES / "qwen-code" / "tool_then_answer", tmp_path)
    first = collect(paths)
    ends = [e for e in first if e["event.name"] == "session.end"]
    assert [e["session.reason"] for e in ends] == ["idle_timeout"]
    second = collect(paths)
    assert_no_duplicates(second)
    assert len(second) == len(first)
