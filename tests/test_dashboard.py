"""The dashboard's routes on a real ingest server: login cookie, same-origin rules, no data without
the secret, `/v1/usage` numbers equal to the store, static assets from the package, no content."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import pytest
from live_support import ThreadedIngest
from support import FIXTURES
from usage_support import collected, report

from collector.dashboard.auth import COOKIE
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


def get(server: ThreadedIngest, path: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{server.port}", **headers})
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        conn.close()


def test_login_sets_a_strict_http_only_cookie_and_redirects(served: Any) -> None:
    server, token, _ = served
    status, headers, _ = get(server, f"/dashboard/login?key={token}&next=/dashboard?days=90")
    assert status == 303 and headers["location"] == "/dashboard?days=90"
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}={token};") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert get(server, f"/dashboard/login?key={token}&next=https://evil.example/")[1]["location"] == "/dashboard"
    assert get(server, "/dashboard/login?key=wrong")[0] == 403


def test_no_data_without_the_secret(served: Any) -> None:
    server, token, _ = served
    assert get(server, "/v1/usage")[0] == 401
    assert get(server, "/v1/usage", Cookie=f"{COOKIE}=nope")[0] == 401
    status, _, body = get(server, "/dashboard")
    assert status == 401 and b"agent-collector dashboard" in body
    assert get(server, "/v1/usage", Cookie=f"{COOKIE}={token}")[0] == 200
    assert get(server, "/v1/usage", **{"X-Agent-Collector-Token": token})[0] == 200


@pytest.mark.parametrize("headers", [
    {"Sec-Fetch-Site": "same-site"}, {"Sec-Fetch-Site": "cross-site"},
    {"Origin": "http://127.0.0.1:1"}, {"Origin": "http://localhost:8000"},
    {"Referer": "http://127.0.0.1:1/attack.html"},
])
def test_other_origins_are_refused_even_with_the_cookie(served: Any, headers: dict[str, str]) -> None:
    server, token, _ = served
    status, answer, body = get(server, "/v1/usage", Cookie=f"{COOKIE}={token}", **headers)
    assert status == 403 and b"cross-origin" in body
    assert not any(k.startswith("access-control-") for k in answer)


def test_same_origin_browser_requests_are_answered(served: Any) -> None:
    server, token, _ = served
    own = f"http://127.0.0.1:{server.port}"
    status, headers, _ = get(server, "/v1/usage?days=366", Cookie=f"{COOKIE}={token}", **{
        "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Referer": own + "/dashboard", "Origin": own})
    assert status == 200
    assert headers["x-frame-options"] == "DENY" and "frame-ancestors 'none'" in headers["content-security-policy"]
    assert not any(k.startswith("access-control-") for k in headers)
    assert get(server, "/dashboard", Cookie=f"{COOKIE}={token}", **{"Sec-Fetch-Site": "none"})[0] == 200
    for name, kind in (("app.js", "text/javascript"), ("app.css", "text/css")):
        status, headers, body = get(server, f"/dashboard/{name}")
        assert status == 200 and headers["content-type"].startswith(kind) and body
    assert get(server, "/dashboard/../config.toml")[0] == 404


def test_the_rest_of_the_ingest_still_refuses_browsers(served: Any) -> None:
    server, token, _ = served
    secret = {"X-Agent-Collector-Token": token}
    assert get(server, "/v1/status", **{"Sec-Fetch-Site": "same-origin"}, **secret)[0] == 403
    assert get(server, "/v1/status", Cookie=f"{COOKIE}={token}")[0] == 401, "the cookie is the dashboard's only"
    assert get(server, "/v1/status", **secret)[0] == 200


def test_usage_numbers_equal_the_store_and_hold_no_content(served: Any) -> None:
    server, token, paths = served
    status, _, body = get(server, "/v1/usage?days=366&tz=UTC", Cookie=f"{COOKIE}={token}")
    data = json.loads(body)
    expected = report(paths, "agent")["rows"]
    assert status == 200 and data["by_agent"] == [{k: v for k, v in r.items() if k != "models"} for r in expected]
    assert sum(d["calls"] for d in data["daily"]) == expected[0]["calls"] > 0
    assert len(data["daily"]) == 366
    assert [f["kind"] for f in data["recent_failures"]] == ["tool"]
    assert "detail" not in data["recent_failures"][0], "no error text with capture off"
    assert data["price_table"].startswith("genai-prices")
    assert get(server, "/v1/usage?days=0", Cookie=f"{COOKIE}={token}")[0] == 400
    assert get(server, "/v1/usage?tz=Nowhere/Land", Cookie=f"{COOKIE}={token}")[0] == 400


def test_the_dashboard_checks_the_secret_with_the_ingest_comparison() -> None:
    """One comparison for the ingest secret (collector.ingest.secret), used by the dashboard: no secret or
    an empty one never matches; the line end of a pasted secret does not matter."""
    import collector.dashboard.auth as auth
    from collector.ingest.secret import token_matches

    assert not [name for name in ("ensure_token", "read_token", "same") if hasattr(auth, name)]
    assert token_matches("ab12", "ab12") and token_matches("ab12", "ab12\n")
    assert not token_matches("ab12", "ab13") and not token_matches("ab12", None)
    assert not token_matches(None, "") and not token_matches("", "") and not token_matches(None, None)


def test_token_file_is_private_and_stable(tmp_path: Path) -> None:
    from support import make_paths

    paths = make_paths(tmp_path)
    first = ensure_token(paths)
    assert ensure_token(paths) == first and len(first) == 64
    assert oct((paths.state_dir / "ingest.token").stat().st_mode & 0o777) == "0o600"
