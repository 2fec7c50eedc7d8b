"""`agent-collector sessions` against a real ingest server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from support.live import ThreadedIngest

from collector.cli.main import main
from collector.ingest.secret import ensure_token
from collector.paths import resolve_paths

SESSIONS: list[dict[str, Any]] = [
    {"agent": "claude-code", "session_id": "3717dcf6-6ccc-43e1", "status": "waiting_for_input",
     "workspace": "/work/shop", "input_tokens_today": 44176,
     "output_tokens_today": 62, "tool_calls_today": 1, "errors_today": 0},
    {"agent": "codex", "session_id": "01a22c23", "status": "closed", "workspace": "/work/api"},
]


@pytest.fixture
def url() -> Iterator[str]:
    SESSIONS[0]["status_since_unix_nano"] = time.time_ns() - 90 * 10**9  # waiting for 1m30s
    token = ensure_token(resolve_paths(None))  # the user's secret, which `sessions` sends
    daemon = ThreadedIngest(snapshot=lambda: {"sessions": SESSIONS}, token=token)
    yield daemon.url
    daemon.stop()


def test_sessions_table_hides_closed(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "--url", url]) == 0
    out = capsys.readouterr().out
    assert "WAITING" in out and "shop" in out and "1m" in out and "44176" in out
    assert "codex" not in out


def test_sessions_json_all(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "--url", url, "--json", "--all"]) == 0
    assert json.loads(capsys.readouterr().out)["sessions"] == SESSIONS


def test_sessions_without_a_daemon(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "--url", "http://127.0.0.1:9"]) == 1
    assert "agent-collector run" in capsys.readouterr().err


def test_sessions_with_another_users_secret_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    daemon = ThreadedIngest(snapshot=lambda: {"sessions": SESSIONS}, token="77" * 32)  # not our secret
    try:
        assert main(["sessions", "--url", daemon.url]) == 1
    finally:
        daemon.stop()
    err = capsys.readouterr().err
    assert "401" in err and "WAITING" not in err
