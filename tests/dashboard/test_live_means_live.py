"""Issue "right on day one", rows "39 live sessions" and "session labels collide": a session is live only
while active within its agent's idle timeout, every session shown has a status, and session ids are
shortened only where the short form stays unique (report, dashboard)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from support import builtin_tracker

from collector.dashboard.data import _sessions
from collector.usage.render import table_lines
from collector.usage.store import UsageStore
from collector.util.short_ids import shortest_unique

HOUR_NS = 3600 * 10**9
# Codex rollout ids are UUIDv7: sessions started the same day share their first 8 characters.
CODEX_IDS = [f"019ad3c1-{i:04x}-7a2b-9c1d-5e6f7a8b9c{i:02d}" for i in range(11)]


def _entry(agent: str, sid: str, when_ns: int, n: int) -> dict[str, Any]:
    return {"event.id": f"{sid}:{n}", "event.name": "llm.response", "time_unix_nano": when_ns,
            "observed_time_unix_nano": when_ns, "gen_ai.agent.type": agent, "gen_ai.session.id": sid,
            "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 2}


def test_day_old_sessions_are_not_live_and_every_session_has_a_status() -> None:
    now = time.time_ns()
    idle = {"opencode": 1800 * 10**9}
    tracker = builtin_tracker(idle_ns=idle.get)
    for i, sid in enumerate(CODEX_IDS):  # history read from transcripts, 33 h old: no hook ever
        tracker.observe(_entry("codex", sid, now - 33 * HOUR_NS, i))
    tracker.observe(_entry("codex", "fresh-codex", now - 60 * 10**9, 100))  # a minute ago
    for sid, ago_ns in (("oc-stale", 2 * HOUR_NS), ("oc-live", 5 * 10**9)):  # hooked; idle timeout 30 min
        tracker.observe_hook("opencode", "session.created", {"properties": {"sessionID": sid}}, sid, now - ago_ns)
    rows = {r["session_id"]: r for r in tracker.sessions(now_ns=now)}
    assert all(r["status"] for r in rows.values()), rows  # no null status pill
    live = {sid for sid, r in rows.items() if r["live"]}
    assert live == {"fresh-codex", "oc-live"}
    assert rows[CODEX_IDS[0]]["status"] == "closed" and rows["fresh-codex"]["status"] == "idle"
    shown = _sessions({"sessions": tracker.sessions(now_ns=now)})  # the dashboard's live sessions card
    assert sorted(s["session_id"] for s in shown) == ["fresh-codex", "oc-live"]


def test_labels_are_unique_in_the_session_report_and_the_dashboard(tmp_path: Path) -> None:
    from zoneinfo import ZoneInfo

    from collector.usage.query import Filters
    from collector.usage.report import ReportRequest, build_report
    from collector.usage.store import connect

    now = time.time_ns()
    store = UsageStore(tmp_path / "u.sqlite")
    store.add([_entry("codex", sid, now - 10**9 * i, i) | {"gen_ai.response.model": "gpt-5.5"}
               for i, sid in enumerate(CODEX_IDS)])
    store.close()
    db = connect(tmp_path / "u.sqlite", readonly=True)
    report = build_report(db, ReportRequest("session", Filters(), ZoneInfo("UTC"), "UTC"))
    db.close()
    labels = [line.split()[1] for line in table_lines(report, False, 200)[2:13]]
    assert len(labels) == 11 and len(set(labels)) == 11, labels
    assert all(CODEX_IDS[0][:8] in label for label in labels)  # still short: a prefix of each id
    tracker = builtin_tracker()
    for i, sid in enumerate(CODEX_IDS):
        tracker.observe(_entry("codex", sid, now - 10**9, i))
    shown = _sessions({"sessions": tracker.sessions(now_ns=now)})
    assert len({s["label"] for s in shown}) == 11
    assert all(s["session_id"].startswith(s["label"]) for s in shown)


def test_ids_are_cut_only_as_far_as_they_stay_unique() -> None:
    short = shortest_unique(["abcdefgh1", "abcdefgh", "zz", "0123456789abcdef"])
    assert short == {"abcdefgh1": "abcdefgh1", "abcdefgh": "abcdefgh", "zz": "zz", "0123456789abcdef": "01234567"}
    assert len(set(shortest_unique(CODEX_IDS).values())) == 11
