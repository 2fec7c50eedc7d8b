"""The dashboard's views of work in headless Chromium against a real daemon serving the fixture homes of all
five agents, collected first by the real `collect --once`: the sessions list filtered by agent in the address
shows that agent's sessions only and their numbers, a search by a tool name finds the session, the timeline
of one (opened as its link opens it) shows the numbers `agent-collector report session ID --json` prints, turn
by turn, a hostile session id stays text; screenshots of the three views, wide and narrow, are kept under the
test's tmp dir (and, with AGENT_COLLECTOR_DOCS_SCREENSHOTS=1, the wide ones in docs/img/)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from support import ROOT
from support.browser import CHROMIUM, Browser, env, login_link, shown_values, start_daemon
from support.collect_once import collect_cli
from support.processes import stop_gently
from support.usage import merged_fixtures
from support.waits import free_port, wait_for

from collector.paths import Paths

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH (Debian package `chromium`; scripts/test.sh installs it "
                             "when CI=true and it runs as root)")]
DOCS_IMG = ROOT / "docs" / "img"
HOSTILE = '<img src=x onerror="document.body.dataset.pwned=1">'


def _post_session_start(paths: Paths, port: int, session: str) -> None:
    """A SessionStart hook for ``session`` posted to the daemon; returns once it lists the session live."""
    from collector.ingest.secret import read_token

    token = read_token(paths)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    body = json.dumps({"session_id": session, "hook_event_name": "SessionStart", "source": "startup"}).encode()
    post = urllib.request.Request(f"http://127.0.0.1:{port}/v1/hooks/claude-code?event=SessionStart", data=body,
                                  method="POST", headers={"X-Agent-Collector-Token": token or "",
                                                          "Content-Type": "application/json"})
    with opener.open(post, timeout=10) as answer:
        assert answer.status == 200

    def listed() -> bool:
        ask = urllib.request.Request(f"http://127.0.0.1:{port}/v1/sessions",
                                     headers={"X-Agent-Collector-Token": token or ""})
        with opener.open(ask, timeout=10) as answer:
            return any(s.get("session_id") == session and s.get("live") for s in json.load(answer)["sessions"])

    wait_for(listed, timeout=60)


def _answers(port: int) -> bool:
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                f"http://127.0.0.1:{port}/dashboard/app.css", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@pytest.fixture
def served(tmp_path: Path) -> Any:
    paths = merged_fixtures(tmp_path / "fixtures")
    collect_cli(paths)  # the store as the real one-shot collection leaves it
    port = free_port()
    log = tmp_path / "daemon.log"
    process = start_daemon(paths, port, log)
    try:
        wait_for(lambda: _answers(port) or process.poll() is not None, timeout=60)
        assert process.poll() is None, log.read_text()[-2000:]
        yield paths, port
    finally:
        stop_gently(process)


def _report(paths: Paths, port: int, session: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "collector", "report", "session", session, "--json",
                           "--home", str(paths.home)], env=env(paths, port), capture_output=True, text=True,
                          timeout=60, cwd=ROOT, check=True)
    return dict(json.loads(done.stdout))


def _money(cost: float | None) -> str:
    return "unpriced" if cost is None else f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"


def _sessions(paths: Paths, agent: str) -> list[tuple[str, int]]:
    import sqlite3

    db = sqlite3.connect(f"file:{paths.data_dir / 'usage.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT session, SUM(calls) FROM session_usage WHERE agent = ? GROUP BY session "
                          "ORDER BY 2 DESC, 1", (agent,)).fetchall()
    finally:
        db.close()


def _open(browser: Browser, paths: Paths, port: int, query: dict[str, str], *extra: str) -> str:
    link, _ = login_link(paths, port, "?" + urlencode(query))
    dom = browser.run(link, "--dump-dom", *extra)
    assert 'data-work="1"' in dom, dom[-3000:]
    return dom


def test_find_a_session_by_filter_and_check_its_timeline(served: tuple[Paths, int], tmp_path: Path) -> None:
    paths, port = served
    browser = Browser(tmp_path)
    codex = _sessions(paths, "codex")
    assert len(codex) >= 2
    listing = _open(browser, paths, port, {"view": "sessions", "agent": "codex", "days": "3660", "sort": "calls"})
    shown = shown_values(listing)
    listed = {k.split(":")[1] for k in shown if k.startswith("s:") and k.endswith(":agent")}
    assert listed == {s for s, _ in codex}, "the filter keeps codex's sessions, all of them"
    assert {v for k, v in shown.items() if k.endswith(":agent")} == {"codex"}
    assert shown["sessions:total"].startswith(f"{len(codex)} sessions")
    session = codex[0][0]  # the one with the most model calls: the first row sorted by calls
    assert listing.index(f'data-k="s:{session}:calls"') == min(listing.index(f'data-k="s:{s}:calls"') for s in listed)
    report = _report(paths, port, session)
    total = report["total"]
    assert shown[f"s:{session}:calls"] == f"{total['calls']:,}"
    assert shown[f"s:{session}:total_tokens"] == f"{total['total_tokens']:,}"
    assert shown[f"s:{session}:cost_usd"] == _money(total["cost_usd"])
    assert f'href="?view=session&amp;of=codex&amp;session={session}"' in listing, "each row links to its timeline"

    searched = shown_values(_open(browser, paths, port, {"view": "sessions", "q": "exec_command", "days": "3660"}))
    found = {k.split(":")[1] for k in searched if k.startswith("s:") and k.endswith(":agent")}
    assert session in found and found <= {s for s, _ in codex}, "search by a tool name finds codex's sessions"

    query = {"view": "session", "of": "codex", "session": session}
    timeline = shown_values(_open(browser, paths, port, query))
    assert timeline["tl:calls"] == f"{total['calls']:,}" and timeline["tl:turns"] == str(len(report["rows"]))
    assert timeline["tl:total_tokens"] == f"{total['total_tokens']:,}"
    assert timeline["tl:cost_usd"] == _money(total["cost_usd"])
    assert timeline["tl:tool_calls"] == f"{total['tool_calls']:,}"
    assert timeline["tl:tool_failures"] == f"{total['tool_failures']:,}"
    for row in report["rows"]:
        assert timeline[f"tl:turn:{row['turn']}:total_tokens"] == f"{row['total_tokens']:,}"
        assert timeline[f"tl:turn:{row['turn']}:cost_usd"] == _money(row["cost_usd"])

    _post_session_start(paths, port, HOSTILE)
    overview = browser.run(login_link(paths, port, "?days=366")[0], "--dump-dom")
    assert 'data-loaded="1"' in overview and "pwned" not in overview.split("<body", 1)[1].split(">", 1)[0]
    assert "&lt;img src=x" in overview, "a hostile session id is shown as text"
    links = overview.count('href="?view=session&amp;of=')
    assert links >= 6, "every live session and every listed failure links to its timeline"
    assert 'href="?view=sessions&amp;agent=codex&amp;days=366"' in overview, "a report row links to its sessions"

    shots = {"sessions": {"view": "sessions", "days": "3660", "sort": "cost"}, "timeline": query,
             "activity": {"view": "activity", "days": "3660"}}
    for name, asked in shots.items():
        for size in ("1280,900", "420,900"):
            shot = tmp_path / f"dashboard-{name}-{size.split(',')[0]}.png"
            link, _ = login_link(paths, port, "?" + urlencode(asked))
            browser.run(link, f"--screenshot={shot}", f"--window-size={size}")
            assert shot.stat().st_size > 10_000, shot
            if os.environ.get("AGENT_COLLECTOR_DOCS_SCREENSHOTS") == "1" and size.startswith("1280"):
                DOCS_IMG.mkdir(parents=True, exist_ok=True)
                shutil.copy2(shot, DOCS_IMG / shot.name)
