"""The dashboard's routes on a real ingest server: the one-time login code and the dashboard token
(no cookie), same-origin rules, no data without a credential, `/v1/usage` numbers equal to the store,
static assets from the package, no content."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES
from support.live import ThreadedIngest
from support.usage import collected, report

from collector.dashboard.auth import SESSION_HEADER, DashboardSessions, issue_code, login_file, redeem_code
from collector.dashboard.routes import DashboardRoute
from collector.ingest.secret import ensure_token


@pytest.fixture
def served(tmp_path: Path) -> Any:
    from zoneinfo import ZoneInfo

    paths = collected(FIXTURES / "claude-code" / "failing_command", tmp_path)
    token = ensure_token(paths)
    route = DashboardRoute(paths, paths.data_dir / "usage.sqlite", lambda: {"version": "x", "sessions": []},
                           False, lambda: (ZoneInfo("UTC"), "UTC"))
    server = ThreadedIngest(routes=[route], token=token)
    yield server, token, paths
    server.stop()


def get(server: ThreadedIngest, path: str, method: str = "GET", **headers: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(method, path, headers={"Host": f"127.0.0.1:{server.port}", **headers})
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        conn.close()


def login(server: ThreadedIngest, paths: Any, **headers: str) -> str:
    """What the page does with the code of the link: one POST, a dashboard token back."""
    code = issue_code(paths)
    status, answer, body = get(server, "/dashboard/session", "POST", **{"X-Agent-Collector-Login": code,
                                                                        "Content-Length": "0", **headers})
    assert status == 200, body
    assert answer["cache-control"] == "no-store" and "set-cookie" not in answer
    granted = json.loads(body)
    assert granted["header"] == SESSION_HEADER and granted["expires_in_s"] == 12 * 3600
    return str(granted["token"])


def test_a_one_time_code_becomes_a_dashboard_token_and_no_cookie(served: Any) -> None:
    server, token, paths = served
    code = issue_code(paths)
    stored = login_file(paths).read_text()
    assert code not in stored and oct(login_file(paths).stat().st_mode & 0o777) == "0o600"
    post = {"Content-Length": "0", "Sec-Fetch-Site": "same-origin", "Origin": f"http://127.0.0.1:{server.port}"}
    assert get(server, "/dashboard/session", "POST", **{"X-Agent-Collector-Login": "wrong", **post})[0] == 403
    status, headers, body = get(server, "/dashboard/session", "POST", **{"X-Agent-Collector-Login": code, **post})
    assert status == 200 and "set-cookie" not in headers
    dashboard = json.loads(body)["token"]
    assert dashboard != token and token not in body.decode()
    again = get(server, "/dashboard/session", "POST", **{"X-Agent-Collector-Login": code, **post})
    assert again[0] == 403, "a code works once"
    assert get(server, "/v1/usage", **{SESSION_HEADER: dashboard})[0] == 200
    assert get(server, "/dashboard/session", **{"X-Agent-Collector-Login": code})[0] == 405, "GET cannot log in"
    status, headers, _ = get(server, f"/dashboard/login?key={token}")
    assert status == 404 and "set-cookie" not in headers, "the old cookie login is gone"


def test_a_dashboard_token_reads_the_dashboard_only(served: Any) -> None:
    server, _, paths = served
    dashboard = login(server, paths)
    assert get(server, "/v1/usage", **{SESSION_HEADER: dashboard})[0] == 200
    replayed = {"X-Agent-Collector-Token": dashboard, SESSION_HEADER: dashboard}
    assert get(server, "/v1/status", **replayed)[0] == 401
    assert get(server, "/v1/sessions", **replayed)[0] == 401
    hook = get(server, "/v1/hooks/claude-code?event=SessionStart", "POST", **replayed,
               **{"Content-Type": "application/json", "Content-Length": "0"})
    assert hook[0] == 401, "a dashboard token never posts hooks"
    assert get(server, "/v1/usage", Cookie=f"agent_collector_dashboard={dashboard}")[0] == 401, "no cookie"


def test_codes_expire_and_tokens_expire() -> None:
    import tempfile

    from support import make_paths

    with tempfile.TemporaryDirectory() as tmp:
        paths = make_paths(Path(tmp))
        code = issue_code(paths, now=1000.0)
        assert not redeem_code(paths, code, now=1000.0 + 121), "past its 2 minutes"
        assert not login_file(paths).exists(), "an expired code is removed"
        code = issue_code(paths, now=1000.0)
        newer = issue_code(paths, now=1001.0)
        assert not redeem_code(paths, code, now=1002.0), "a new link replaces the old one"
        assert redeem_code(paths, newer, now=1002.0) and not redeem_code(paths, newer, now=1002.0)
        login_file(paths).write_bytes(b"[not json")
        assert not redeem_code(paths, "x"), "a damaged file is no login"
    clock = [0.0]
    sessions = DashboardSessions(ttl_s=60.0, clock=lambda: clock[0])
    token, _ = sessions.grant()
    assert sessions.valid(token) and not sessions.valid(token + "x") and not sessions.valid(None)
    clock[0] = 61.0
    assert not sessions.valid(token), "12 h in the daemon, 60 s here"
    tokens = [sessions.grant()[0] for _ in range(40)]
    assert not sessions.valid(tokens[0]) and sessions.valid(tokens[-1]), "at most 32 kept, the oldest go"


def test_no_data_without_a_credential(served: Any) -> None:
    server, token, _ = served
    assert get(server, "/v1/usage")[0] == 401
    assert get(server, "/v1/usage", **{SESSION_HEADER: "nope"})[0] == 401
    status, _, body = get(server, "/dashboard")
    assert status == 200 and b"/v1/usage" not in body and token.encode() not in body, "the page holds no data"
    assert get(server, "/v1/usage", **{"X-Agent-Collector-Token": token})[0] == 200, "programs use the ingest token"


@pytest.mark.parametrize("headers", [
    {"Sec-Fetch-Site": "same-site"}, {"Sec-Fetch-Site": "cross-site"},
    {"Origin": "http://127.0.0.1:1"}, {"Origin": "http://localhost:8000"},
    {"Referer": "http://127.0.0.1:1/attack.html"},
])
def test_other_origins_are_refused_even_with_a_token(served: Any, headers: dict[str, str]) -> None:
    server, _, paths = served
    dashboard = login(server, paths)
    status, answer, body = get(server, "/v1/usage", **{SESSION_HEADER: dashboard}, **headers)
    assert status == 403 and b"cross-origin" in body
    assert not any(k.startswith("access-control-") for k in answer)
    code = issue_code(paths)
    status, _, body = get(server, "/dashboard/session", "POST", **{"X-Agent-Collector-Login": code,
                                                                   "Content-Length": "0", **headers})
    assert status == 403, "another origin cannot redeem a code either"


def test_same_origin_browser_requests_are_answered(served: Any) -> None:
    server, _, paths = served
    own = f"http://127.0.0.1:{server.port}"
    dashboard = login(server, paths, **{"Sec-Fetch-Site": "same-origin", "Origin": own})
    status, headers, _ = get(server, "/v1/usage?days=366", **{SESSION_HEADER: dashboard}, **{
        "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Referer": own + "/dashboard", "Origin": own})
    assert status == 200
    assert headers["x-frame-options"] == "DENY" and "frame-ancestors 'none'" in headers["content-security-policy"]
    assert not any(k.startswith("access-control-") for k in headers)
    assert get(server, "/dashboard/", **{"Sec-Fetch-Site": "none"})[0] == 200
    for name, kind in (("app.js", "text/javascript"), ("app.css", "text/css")):
        status, headers, body = get(server, f"/dashboard/{name}")
        assert status == 200 and headers["content-type"].startswith(kind) and body
    assert get(server, "/dashboard/../config.toml")[0] == 404


def test_the_rest_of_the_ingest_still_refuses_browsers(served: Any) -> None:
    server, token, _ = served
    secret = {"X-Agent-Collector-Token": token}
    assert get(server, "/v1/status", **{"Sec-Fetch-Site": "same-origin"}, **secret)[0] == 403
    assert get(server, "/v1/status", **secret)[0] == 200


def test_usage_numbers_equal_the_store_and_hold_no_content(served: Any) -> None:
    server, _, paths = served
    dashboard = {SESSION_HEADER: login(server, paths)}
    status, _, body = get(server, "/v1/usage?days=366&tz=UTC", **dashboard)
    data = json.loads(body)
    expected = report(paths, "agent")["rows"]
    assert status == 200 and data["by_agent"] == [{k: v for k, v in r.items() if k != "models"} for r in expected]
    assert sum(d["calls"] for d in data["daily"]) == expected[0]["calls"] > 0
    assert len(data["daily"]) == 366
    assert [f["kind"] for f in data["recent_failures"]] == ["tool"]
    assert "detail" not in data["recent_failures"][0], "no error text with capture off"
    assert data["price_table"].startswith("genai-prices")
    assert get(server, "/v1/usage?days=0", **dashboard)[0] == 400
    assert get(server, "/v1/usage?tz=Nowhere/Land", **dashboard)[0] == 400


def test_the_dashboard_checks_the_secret_with_the_ingest_comparison() -> None:
    """One comparison for the ingest secret (collector.ingest.secret), used by the dashboard: no secret or
    an empty one never matches; the line end of a pasted secret does not matter."""
    import collector.dashboard.auth as auth
    from collector.ingest.secret import token_matches

    assert not [name for name in ("ensure_token", "read_token", "same", "COOKIE") if hasattr(auth, name)]
    assert token_matches("ab12", "ab12") and token_matches("ab12", "ab12\n")
    assert not token_matches("ab12", "ab13") and not token_matches("ab12", None)
    assert not token_matches(None, "") and not token_matches("", "") and not token_matches(None, None)


def test_token_file_is_private_and_stable(tmp_path: Path) -> None:
    from support import make_paths

    paths = make_paths(tmp_path)
    first = ensure_token(paths)
    assert ensure_token(paths) == first and len(first) == 64
    assert oct((paths.state_dir / "ingest.token").stat().st_mode & 0o777) == "0o600"


def test_the_dashboard_command_prints_a_one_time_link_for_our_own_daemon_only(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import collector.ingest.owner as owner
    from collector.cli.main import main
    from collector.paths import resolve_paths

    (tmp_path / "home").mkdir()
    paths = resolve_paths(tmp_path / "home")
    monkeypatch.setenv("AGENT_COLLECTOR_INGEST__PORT", "45123")
    assert main(["dashboard", "--home", str(paths.home)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("http://127.0.0.1:45123/dashboard/#code=") and "works once" in err
    assert redeem_code(paths, out.strip().rsplit("=", 1)[1])
    monkeypatch.setattr(owner, "refuse_reason", lambda port: f"127.0.0.1:{port} is held by another user (uid 7)")
    assert main(["dashboard", "--home", str(paths.home)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "held by another user (uid 7)" in err and not login_file(paths).exists()


def test_usage_narrowed_to_a_repository_and_branch(tmp_path: Path) -> None:
    """The usage tables, days and total follow the repository and branch filters; the choices do not."""
    import time
    from zoneinfo import ZoneInfo

    from collector.dashboard.data import usage_view
    from collector.usage.store import UsageStore

    shop, web = "https://github.com/acme/shop", "https://github.com/acme/web"
    now = time.time()

    def call(eid: str, repo: str | None, branch: str | None, inp: int) -> dict[str, Any]:
        git = {"vcs.repository.url.full": repo, "vcs.ref.head.name": branch} if repo else {}
        return {"event.id": eid, "event.name": "llm.response", "time_unix_nano": int(now * 1e9) - 1000,
                "gen_ai.agent.type": "codex", "gen_ai.session.id": eid, "gen_ai.usage.input_tokens": inp, **git}

    store = UsageStore(tmp_path / "u.sqlite")
    store.add([call("a", shop, "main", 100), call("b", shop, "feature/x", 7), call("c", web, "main", 50),
               call("d", None, None, 1)])
    store.close()

    def view(**filters: str) -> dict[str, Any]:
        return usage_view(tmp_path / "u.sqlite", {}, ZoneInfo("UTC"), "UTC", 30, False, now, **filters)

    every = view()
    assert every["git"] == [{"repo": "", "branch": ""}, {"repo": shop, "branch": "feature/x"},
                            {"repo": shop, "branch": "main"}, {"repo": web, "branch": "main"}]
    assert {r["key"]: r["input_tokens"] for r in every["by_branch"]} == {"": 1, "feature/x": 7, "main": 150}
    assert {r["key"]: r["input_tokens"] for r in every["by_repo"]} == {"": 1, shop: 107, web: 50}
    for filters, total in (({"repo": "shop"}, 107), ({"repo": shop, "branch": "main"}, 100),
                           ({"branch": "main"}, 150), ({"branch": "nope"}, 0)):
        narrowed = view(**filters)
        assert narrowed["total"]["input_tokens"] == sum(d["input_tokens"] for d in narrowed["daily"]) == total
        assert sum(r["input_tokens"] for r in narrowed["by_agent"]) == total
        assert narrowed["git"] == every["git"] and (narrowed["repo"], narrowed["branch"]) == (
            filters.get("repo"), filters.get("branch"))


def test_usage_filters_are_checked_at_the_route(served: Any) -> None:
    server, _, paths = served
    dashboard = {SESSION_HEADER: login(server, paths)}
    everything = json.loads(get(server, "/v1/usage?days=366&tz=UTC", **dashboard)[2])
    assert everything["total"]["calls"] > 0 and everything["git"] == [{"repo": "", "branch": ""}]
    status, _, body = get(server, "/v1/usage?days=366&tz=UTC&repo=&branch=", **dashboard)
    assert status == 200 and json.loads(body)["total"] == everything["total"], "empty is no filter"
    status, _, body = get(server, "/v1/usage?days=366&tz=UTC&branch=feature%2Fx", **dashboard)
    data = json.loads(body)
    assert status == 200 and data["branch"] == "feature/x" and data["total"]["calls"] == 0 and data["by_agent"] == []
    assert get(server, "/v1/usage?repo=" + "a" * 2049, **dashboard)[0] == 400
    assert get(server, "/v1/usage?branch=a%0Ab", **dashboard)[0] == 400


def test_the_budgets_state_is_in_the_view(tmp_path: Path) -> None:
    """The daemon's [budget] state (its status snapshot) reaches the page: how many limits, and each one at
    its warning or over with its part spent; nothing when there are none."""
    from zoneinfo import ZoneInfo

    from collector.dashboard.data import usage_view

    snapshot = {"budget": {"limits": 2, "crossed": [
        {"name": "daily", "level": "over", "fraction": 1.03, "hard": True, "spent": 10.3},
        {"name": "weekly", "level": "warn", "fraction": 0.81, "hard": False},
        {"name": "odd", "level": "ok"}, "not a dict"]}}
    view = usage_view(tmp_path / "none.sqlite", snapshot, ZoneInfo("UTC"), "UTC", 30, False, 1.8e9)
    assert view["budget"] == {"limits": 2, "crossed": [
        {"name": "daily", "level": "over", "fraction": 1.03, "hard": True},
        {"name": "weekly", "level": "warn", "fraction": 0.81, "hard": False}]}
    assert usage_view(tmp_path / "none.sqlite", {}, ZoneInfo("UTC"), "UTC", 30, False, 1.8e9)["budget"] == {
        "limits": 0, "crossed": []}
