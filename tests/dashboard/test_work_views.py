"""The work views' routes on a real ingest server over a collected Claude Code session: nothing without a dashboard
login, each query parameter checked (400 naming it), the sessions list, timeline and activity answering the
store's numbers, a session the store lacks 404; one price table reused between requests until it ages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from support import FIXTURES
from support.live import ThreadedIngest
from support.usage import collected, report
from test_dashboard import get, login

from collector.dashboard.auth import SESSION_HEADER
from collector.dashboard.routes import DashboardRoute
from collector.dashboard.sessions import PRICES_TTL_S, WorkViews
from collector.ingest.secret import ensure_token


@pytest.fixture
def served(tmp_path: Path) -> Any:
    paths = collected(FIXTURES / "claude-code" / "failing_command", tmp_path)
    token = ensure_token(paths)
    route = DashboardRoute(paths, paths.data_dir / "usage.sqlite", lambda: {"version": "x", "sessions": []},
                           False, lambda: (ZoneInfo("UTC"), "UTC"))
    server = ThreadedIngest(routes=[route], token=token)
    yield server, paths
    server.stop()


def test_the_work_views_need_a_login_and_check_their_parameters(served: Any) -> None:
    server, paths = served
    for path in ("/v1/usage/sessions", "/v1/usage/timeline?agent=a&session=b", "/v1/usage/activity"):
        assert get(server, path)[0] == 401
    auth = {SESSION_HEADER: login(server, paths)}
    for query, name in (("days=0", "days"), ("days=x", "days"), ("sort=price", "sort"), ("order=up", "order"),
                        ("limit=500", "limit"), ("offset=-1", "offset"), ("from=yesterday", "from"),
                        ("from=2026-12-02&to=2026-12-01", "to"), ("agent=%01", "agent"), ("tz=Mars/Base", "zone")):
        status, _, body = get(server, f"/v1/usage/sessions?{query}", **auth)
        assert status == 400 and name in json.loads(body)["error"], (query, body)
    assert get(server, "/v1/usage/timeline?agent=claude-code", **auth)[0] == 400
    assert get(server, "/v1/usage/timeline?agent=claude-code&session=nope", **auth)[0] == 404


def test_the_work_views_answer_the_stores_numbers(served: Any) -> None:
    server, paths = served
    auth = {SESSION_HEADER: login(server, paths)}
    status, headers, body = get(server, "/v1/usage/sessions?days=3660", **auth)
    assert status == 200 and headers["content-security-policy"].startswith("default-src 'none'")
    listed = json.loads(body)
    truth = report(paths, "session")["rows"]
    assert listed["total"] == len(truth) == len(listed["rows"]) >= 1
    row = listed["rows"][0]
    assert row["title"] == f"claude-code session {row['label']}" and row["status"] != "live"
    same = next(r for r in truth if r["key"].endswith(row["session"]))
    assert (row["calls"], row["tool_failures"]) == (same["calls"], same["tool_failures"]) and same["tool_failures"]
    status, _, body = get(server, f"/v1/usage/timeline?agent=claude-code&session={row['session']}", **auth)
    turns = json.loads(body)["turns"]
    assert status == 200 and sum(t["calls"] for t in turns) == row["calls"]
    failed = [e for t in turns for e in t["events"] if e["kind"] == "tool" and e["outcome"] == "error"]
    assert len(failed) == row["tool_failures"]
    status, _, body = get(server, "/v1/usage/activity?days=3660", **auth)
    activity = json.loads(body)
    assert status == 200 and sum(map(sum, activity["by_hour"])) == row["calls"]
    assert [r["session"] for r in activity["top"]["cost"]] == [row["session"]]
    assert get(server, "/v1/usage/sessions?days=3660&agent=codex", **auth)[2].count(b'"session"') == 0


def test_one_price_table_between_requests_until_it_ages(tmp_path: Path) -> None:
    now = [0.0]
    views = WorkViews(tmp_path / "usage.sqlite", False, None, clock=lambda: now[0])
    first = views.prices()
    now[0] = PRICES_TTL_S - 1
    assert views.prices() is first
    now[0] = PRICES_TTL_S + 1
    assert views.prices() is not first
