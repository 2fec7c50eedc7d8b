"""Session status: every transition, parallel waits, entries as input, counters, and the real captures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import builtin_tracker

from collector.definitions.status_rules import AgentStatusRules
from collector.model.entry import event_id
from collector.pipeline.status import SessionStatusTracker

FIXTURES = Path(__file__).parent.parent / "fixtures" / "hooks"
SID = "3717dcf6-6ccc-43e1-999e-09b113fae890"


class Session:
    """Plays one session's hook events into a tracker, the way the spool or the ingest server would."""

    def __init__(self, agent: str = "claude-code", tracker: SessionStatusTracker | None = None) -> None:
        self.agent = agent
        self.tracker = tracker or builtin_tracker()
        self.n = 0
        self.emitted: list[dict[str, Any]] = []

    def hook(self, event: str, **payload: Any) -> list[dict[str, Any]]:
        self.n += 1
        body = {"session_id": SID, "hook_event_name": event, "cwd": "/work/p", **payload}
        out = self.tracker.observe_hook(self.agent, event, body, trigger_id=f"t{self.n}",
                                        time_ns=1_800_000_000_000_000_000 + self.n)
        self.emitted += out
        return out

    @property
    def status(self) -> str | None:
        return self.tracker.status_of(self.agent, SID)

    def status_of_other(self, session_id: str) -> str | None:
        return self.tracker.status_of(self.agent, session_id)


def bash(call_id: str, command: str = "ls") -> dict[str, Any]:
    return {"tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": call_id}


def test_session_start_is_idle_and_emits_one_status_entry() -> None:
    s = Session()
    out = s.hook("SessionStart", source="startup")
    assert s.status == "idle"
    assert len(out) == 1
    entry = out[0]
    assert entry["event.name"] == "session.status"
    assert entry["session.status"] == "idle"
    assert "session.previous_status" not in entry  # nothing was known before
    assert entry["gen_ai.session.id"] == SID
    assert entry["gen_ai.agent.type"] == "claude-code"
    assert entry["workspace.path"] == "/work/p"
    assert entry["event.id"] == event_id("session.status", "claude-code", SID, "t1", "idle")


def test_prompt_runs_stop_reviews_end_closes() -> None:
    s = Session()
    s.hook("SessionStart", source="startup")
    s.hook("UserPromptSubmit", prompt="hi")
    assert s.status == "running"
    s.hook("PreToolUse", **bash("toolu_1"))
    s.hook("PostToolUse", **bash("toolu_1"), tool_response={"stdout": "x"})
    s.hook("Stop", last_assistant_message="done")
    assert s.status == "ready_for_review"
    s.hook("SessionEnd", reason="other")
    assert s.status == "closed"
    pairs = [(e.get("session.previous_status"), e["session.status"]) for e in s.emitted]
    assert pairs == [(None, "idle"), ("idle", "running"), ("running", "ready_for_review"),
                     ("ready_for_review", "closed")]


def test_unchanged_status_emits_nothing() -> None:
    s = Session()
    s.hook("UserPromptSubmit", prompt="hi")
    assert s.hook("PreToolUse", **bash("toolu_1")) == []
    assert s.hook("PostToolUse", **bash("toolu_1")) == []
    assert s.hook("MessageDisplay", delta="text") == []  # no rule: ignored


def test_compaction_restart_keeps_the_state() -> None:
    s = Session()
    s.hook("SessionStart", source="startup")
    s.hook("UserPromptSubmit", prompt="hi")
    s.hook("PreCompact", trigger="auto")
    assert s.hook("SessionStart", source="compact") == []
    assert s.status == "running"
    s.hook("SessionStart", source="resume")
    assert s.status == "idle"


def test_ask_user_question_waits_until_its_own_result() -> None:
    s = Session()
    s.hook("UserPromptSubmit", prompt="hi")
    ask = {"tool_name": "AskUserQuestion", "tool_input": {"questions": []}, "tool_use_id": "toolu_q"}
    s.hook("PreToolUse", **ask)
    assert s.status == "waiting_for_input"
    snapshot = s.tracker.sessions()[0]
    assert snapshot["waiting_for"][0]["key"] == "toolu_q"
    assert snapshot["waiting_for"][0]["kind"] == "question"
    s.hook("PostToolUse", **ask, tool_response={"answers": {}})
    assert s.status == "running"


def test_permission_request_without_id_pairs_with_its_pre_tool_use() -> None:
    s = Session()
    s.hook("UserPromptSubmit", prompt="hi")
    s.hook("PreToolUse", **bash("toolu_1", "rm -rf build"))
    s.hook("PermissionRequest", tool_name="Bash", tool_input={"command": "rm -rf build"})
    assert s.status == "waiting_for_input"
    assert s.tracker.sessions()[0]["waiting_for"][0]["key"] == "toolu_1"
    s.hook("PostToolUse", **bash("toolu_1", "rm -rf build"))
    assert s.status == "running"


def test_permission_denied_clears_the_wait() -> None:
    s = Session()
    s.hook("UserPromptSubmit", prompt="hi")
    s.hook("PreToolUse", **bash("toolu_1", "curl x"))
    s.hook("PermissionRequest", tool_name="Bash", tool_input={"command": "curl x"})
    s.hook("PermissionDenied", **bash("toolu_1", "curl x"), reason="user said no")
    assert s.status == "running"


def test_two_parallel_waits_one_finishes_first() -> None:
    s = Session()
    s.hook("UserPromptSubmit", prompt="hi")
    s.hook("PreToolUse", **bash("toolu_a", "make a"))
    s.hook("PreToolUse", **bash("toolu_b", "make b"))
    s.hook("PermissionRequest", tool_name="Bash", tool_input={"command": "make a"})
    s.hook("PermissionRequest", tool_name="Bash", tool_input={"command": "make b"})
    assert s.status == "waiting_for_input"
    assert {w["key"] for w in s.tracker.sessions()[0]["waiting_for"]} == {"toolu_a", "toolu_b"}
    assert s.hook("PostToolUse", **bash("toolu_a", "make a")) == []
    assert s.status == "waiting_for_input"  # b still waits
    out = s.hook("PostToolUse", **bash("toolu_b", "make b"))
    assert s.status == "running"
    assert out[0]["session.previous_status"] == "waiting_for_input"


def test_a_parallel_tool_finishing_does_not_hide_a_question() -> None:
    s = Session()
    s.hook("UserPromptSubmit", prompt="hi")
    s.hook("PreToolUse", **bash("toolu_r", "sleep 1"))
    s.hook("PreToolUse", tool_name="AskUserQuestion", tool_input={"q": 1}, tool_use_id="toolu_q")
    s.hook("PostToolUseFailure", **bash("toolu_r", "sleep 1"), error="Exit code 1")
    assert s.status == "waiting_for_input"
    s.hook("PostToolUse", tool_name="AskUserQuestion", tool_input={"q": 1}, tool_use_id="toolu_q")
    assert s.status == "running"


def test_elicitation_waits_until_its_result() -> None:
    s = Session()
    s.hook("UserPromptSubmit", prompt="hi")
    s.hook("Elicitation", mcp_server_name="db", message="password?", elicitation_id="el-1")
    assert s.status == "waiting_for_input"
    s.hook("ElicitationResult", mcp_server_name="db", elicitation_id="el-2", action="accept")
    assert s.status == "waiting_for_input"  # another elicitation's result
    s.hook("ElicitationResult", mcp_server_name="db", elicitation_id="el-1", action="accept")
    assert s.status == "running"


def test_blocking_notification_waits_idle_prompt_does_not() -> None:
    s = Session()
    s.hook("UserPromptSubmit", prompt="hi")
    assert s.hook("Notification", notification_type="idle_prompt", message="waiting") == []
    s.hook("Notification", notification_type="permission_prompt", message="allow?")
    assert s.status == "waiting_for_input"
    s.hook("PostToolUse", **bash("toolu_1"))
    assert s.status == "running"


def test_notification_does_not_replace_a_keyed_wait() -> None:
    s = Session()
    s.hook("UserPromptSubmit", prompt="hi")
    s.hook("PreToolUse", **bash("toolu_a", "a"))
    s.hook("PreToolUse", **bash("toolu_b", "b"))
    s.hook("PermissionRequest", tool_name="Bash", tool_input={"command": "b"})
    s.hook("Notification", notification_type="permission_prompt", message="allow b?")
    s.hook("PostToolUse", **bash("toolu_a", "a"))
    assert s.status == "waiting_for_input"


@pytest.mark.parametrize(("event", "status"), [("Stop", "ready_for_review"), ("StopFailure", "error"),
                                                ("SessionEnd", "closed"), ("UserPromptSubmit", "running")])
def test_turn_boundaries_clear_pending_waits(event: str, status: str) -> None:
    s = Session()
    s.hook("UserPromptSubmit", prompt="hi")
    s.hook("PreToolUse", tool_name="AskUserQuestion", tool_input={}, tool_use_id="toolu_q")
    s.hook(event, error="rate_limit")
    assert s.status == status
    assert s.tracker.sessions()[0]["waiting_for"] == []


def test_stop_failure_is_error_and_a_new_prompt_recovers() -> None:
    s = Session()
    s.hook("UserPromptSubmit", prompt="hi")
    s.hook("StopFailure", error="rate_limit")
    assert s.status == "error"
    s.hook("UserPromptSubmit", prompt="again")
    assert s.status == "running"


def test_a_late_session_start_does_not_undo_later_events() -> None:
    # SessionStart comes through the command hook's spool file, the prompt over http: the daemon may
    # read the prompt first.
    tracker = builtin_tracker()
    tracker.observe_hook("claude-code", "UserPromptSubmit", {"session_id": SID}, "p", time_ns=200)
    assert tracker.observe_hook("claude-code", "SessionStart", {"session_id": SID, "source": "startup"},
                                "s", time_ns=100) == []
    assert tracker.status_of("claude-code", SID) == "running"


def test_events_after_session_end_keep_it_closed() -> None:
    s = Session()
    s.hook("UserPromptSubmit", prompt="hi")
    s.hook("SessionEnd", reason="other")
    assert s.hook("PostToolBatch", tool_calls=[]) == []
    assert s.status == "closed"


def test_replay_gives_the_same_ids() -> None:
    def play() -> list[str]:
        s = Session()
        s.hook("SessionStart", source="startup")
        s.hook("UserPromptSubmit", prompt="hi")
        s.hook("Stop")
        return [e["event.id"] for e in s.emitted]

    first, second = play(), play()
    assert first == second and len(set(first)) == 3


def test_unknown_agent_or_event_is_ignored() -> None:
    assert Session("nobody").hook("SessionStart") == []
    assert Session().hook("NoSuchEvent") == []
    tracker = builtin_tracker()
    assert tracker.observe_hook("claude-code", "Stop", {"no": "session"}, "t", 1) == []


def test_a_presence_rule_tells_a_sub_agents_stop_from_the_turns_end() -> None:
    rules = AgentStatusRules.from_data({
        "payload_fields": {"session_id": ["parent", "session_id"], "subagent_id": ["agent"]},
        "events": {"Prompt": "prompt", "Stop": {"field": "subagent_id", "present": True, "then": "activity",
                                                "else": "settle"},
                   "Quiet": {"field": "subagent_id", "present": False, "then": "ignore", "else": "activity"}}})
    s = Session("a", SessionStatusTracker({"a": rules}))
    s.hook("Prompt")
    assert s.hook("Stop", agent="sub-1", parent=SID, session_id="sub-1") == [] and s.status == "running"
    assert s.status_of_other("sub-1") is None, "a sub-agent's hook counts for its parent's session"
    assert s.hook("Quiet") == [] and s.hook("Stop", agent="") and s.status == "ready_for_review"


# -- entries as input (what the pipeline feeds) ------------------------------------------------------

def entry(name: str, n: int, hook: str | None = None, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "schema.version": "1.0", "event.id": f"e{n}", "event.name": name, "time_unix_nano": n,
        "observed_time_unix_nano": n, "gen_ai.agent.type": "claude-code", "gen_ai.session.id": SID,
        "user.id": "alice", "host.name": "box", **fields,
    }
    if hook:
        out["agent.hook_event_name"] = hook
    return out


def test_entries_drive_status_and_copy_context() -> None:
    tracker = builtin_tracker(day_of=lambda ns: "2026-11-30")
    assert tracker.observe(entry("session.start", 1, "SessionStart", **{"session.source": "startup"}))
    out = tracker.observe(entry("user.prompt", 2, "UserPromptSubmit", **{"gen_ai.turn.id": "turn-1"}))
    assert out[0]["session.status"] == "running"
    assert out[0]["user.id"] == "alice" and out[0]["host.name"] == "box"
    assert out[0]["gen_ai.turn.id"] == "turn-1"
    assert out[0]["agent.hook_event_name"] == "UserPromptSubmit"
    tool = {"gen_ai.tool.name": "Bash", "gen_ai.tool.call.id": "toolu_1",
            "gen_ai.tool.call.arguments.hmac": "ab" * 32}
    tracker.observe(entry("tool.call", 3, "PreToolUse", **tool))
    perm = {"gen_ai.tool.name": "Bash", "gen_ai.tool.call.arguments.hmac": "ab" * 32}
    assert tracker.observe(entry("tool.approve", 4, "PermissionRequest", **perm))[0]["session.status"] == (
        "waiting_for_input")
    assert tracker.observe(entry("tool.result", 5, "PostToolUse", **tool))[0]["session.status"] == "running"
    # transcript entries (no hook name) never move the status
    assert tracker.observe(entry("llm.response", 6, **{"gen_ai.usage.input_tokens": 10})) == []
    assert tracker.status_of("claude-code", SID) == "running"
    # our own output is not input
    assert tracker.observe(entry("session.status", 7, "Stop")) == []


def test_counters_today_count_each_call_once() -> None:
    tracker = builtin_tracker(day_of=lambda ns: "2026-11-29" if ns < 100 else "2026-11-30")
    usage = {"gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 50,
             "gen_ai.response.model": "claude-sonnet-4-5"}
    tracker.observe(entry("llm.response", 10, **usage))  # yesterday
    tracker.observe(entry("llm.response", 100, **usage))
    tracker.observe(entry("llm.response", 100, **usage))  # the same entry replayed
    tracker.observe(entry("llm.response", 101, **usage))
    call = {"gen_ai.tool.call.id": "toolu_1", "gen_ai.tool.name": "Bash"}
    tracker.observe(entry("tool.call", 102, "PreToolUse", **call))
    tracker.observe(entry("tool.call", 103, **call))  # the same call seen in the transcript
    failed = {**call, "tool.result.status": "error"}
    tracker.observe(entry("tool.result", 104, "PostToolUseFailure", **failed))
    tracker.observe(entry("error", 105, **{"error.type": "api"}))
    tracker.observe(entry("llm.response", 50, **usage))  # a late line of yesterday
    (row,) = tracker.sessions(now_ns=200)
    assert row["input_tokens_today"] == 2000
    assert row["output_tokens_today"] == 100
    assert row["tool_calls_today"] == 1
    assert row["errors_today"] == 2
    assert row["model"] == "claude-sonnet-4-5"
    assert tracker.sessions(now_ns=50)[0]["input_tokens_today"] == 0  # not that day's counters


def test_sessions_snapshot_is_bounded_and_ordered() -> None:
    tracker = builtin_tracker(max_sessions=3)
    for i in range(5):
        tracker.observe_hook("claude-code", "SessionStart", {"session_id": f"s{i}"}, f"t{i}", i)
    rows = tracker.sessions()
    assert [r["session_id"] for r in rows] == ["s4", "s3", "s2"]
    assert tracker.summary()["idle"] == 3


# -- the real captures of every agent ----------------------------------------------------------------

def replay(agent: str, case: str) -> list[str]:
    tracker = builtin_tracker()
    statuses: list[str] = []
    for n, line in enumerate((FIXTURES / agent / f"{case}.jsonl").read_text().splitlines()):
        env = json.loads(line)
        for out in tracker.observe_hook(agent, env["event"], env["payload"], f"{case}:{n}",
                                        int(env["ts"] * 1e9)):
            statuses.append(out["session.status"])
    return statuses


@pytest.mark.parametrize(("agent", "case", "expected"), [
    ("claude-code", "tool_then_answer", ["idle", "running", "ready_for_review", "closed"]),
    ("claude-code", "two_turns_resume",
     ["idle", "running", "ready_for_review", "closed", "idle", "running", "ready_for_review", "closed"]),
    ("codex", "two_turns_resume",
     ["idle", "running", "ready_for_review", "closed", "idle", "running", "ready_for_review", "closed"]),
    ("gemini-cli", "two_turns_resume",
     ["idle", "running", "ready_for_review", "closed", "idle", "running", "ready_for_review", "closed"]),
    # Qwen Code fires no SessionEnd in -p mode.
    ("qwen-code", "two_turns_resume", ["idle", "running", "ready_for_review", "idle", "running",
                                       "ready_for_review"]),
    ("opencode", "two_turns_resume", ["idle", "running", "ready_for_review", "running", "ready_for_review"]),
])
def test_real_captures(agent: str, case: str, expected: list[str]) -> None:
    assert replay(agent, case) == expected


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/St_Johns", "Asia/Kathmandu"])
def test_the_counters_day_remembered_per_minute_is_the_local_day(zone: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tracker remembers the local day per minute; around midnights and a DST change (Berlin,
    2026-03-29 01:00 UTC) every answer is the one strftime gives for that very nanosecond."""
    import time

    from collector.pipeline.local_days import LocalDays, local_day

    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        days = LocalDays(cap=8)
        change = 1_774_746_000
        midnights = [int(time.mktime((2026, 3, day, 0, 0, 0, 0, 0, -1))) for day in range(26, 32)]
        seconds = list(range(change - 5400, change + 5400, 7)) + [m + o for m in midnights for o in range(-90, 90)]
        for second in seconds:
            for ns in (second * 10**9, second * 10**9 + 999_999_999):
                assert days(ns) == local_day(ns), ns
    finally:
        monkeypatch.undo()
        time.tzset()
