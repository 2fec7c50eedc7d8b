"""Headless Chromium (Debian's package) against a real daemon that collected real sessions of all five
agents, logged in with the one-time link `agent-collector dashboard` prints: the dashboard shows the
store's numbers, a screenshot is kept in tmp/test-artifacts/, a page of another origin (another local
server, same site or not) cannot read the dashboard's data, and that plain server receives no credential
from the browser after the login (no cookie, no token header, nothing in the profile's cookie store)."""

from __future__ import annotations

import html
import json
import re
import sqlite3
import subprocess
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support import ROOT
from support.browser import CHROMIUM, Browser, login_link, shown_values, start_daemon
from support.processes import stop_gently
from support.usage import merged_fixtures
from support.waits import free_port

from collector.paths import Paths

ARTIFACTS = ROOT / "tmp" / "test-artifacts"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH (Debian package `chromium`; scripts/test.sh installs it "
                             "when CI=true and it runs as root)")]

ATTACK = """<!doctype html><meta charset=utf-8><pre id=out>pending</pre><script>
const target = new URLSearchParams(location.search).get("target");
const out = [];
async function attempt(label, fn) {
  try { out.push(label + ": read " + (await fn()).slice(0, 300)); }
  catch (e) { out.push(label + ": blocked " + e.name); }
}
(async () => {
  await attempt("cors", async () => (await fetch(target + "/v1/usage?days=366", {credentials: "include"})).text());
  await attempt("no-cors", async () => {
    const r = await fetch(target + "/v1/usage?days=366", {credentials: "include", mode: "no-cors"});
    return "type=" + r.type + " body=" + (await r.text());
  });
  await attempt("page", async () => (await fetch(target + "/dashboard", {credentials: "include"})).text());
  await attempt("own", async () => (await fetch("/probe", {credentials: "include"})).text());
  document.getElementById("out").textContent = out.join("\\n");
})();
</script>"""


def _wait_collected(paths: Paths, daemon: subprocess.Popen[bytes], log: Path) -> int:
    """Until the store stops growing (every source read to its end)."""
    store = paths.data_dir / "usage.sqlite"
    last, stable, deadline = -1, 0, time.time() + 60
    while time.time() < deadline and stable < 3:
        assert daemon.poll() is None, log.read_text()[-2000:]
        time.sleep(0.5)
        try:
            db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
            count = db.execute("SELECT COUNT(*) FROM events").fetchone()[0]
            db.close()
        except sqlite3.Error:
            continue
        stable = stable + 1 if count == last and count > 0 else 0
        last = count
    assert stable >= 3, "the daemon did not finish collecting"
    return last


def _store_by_agent(paths: Paths) -> dict[str, dict[str, int]]:
    db = sqlite3.connect(paths.data_dir / "usage.sqlite")
    rows = db.execute("""SELECT agent, SUM(name='llm.response'), SUM(input - cache_read - cache_write),
                                SUM(cache_read), SUM(cache_write), SUM(output), SUM(name='tool.call'),
                                SUM(name='tool.result' AND tool_status='error')
                         FROM events GROUP BY agent""").fetchall()
    fields = ("calls", "uncached_input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
              "tool_calls", "tool_failures")
    return {r[0]: dict(zip(fields, r[1:], strict=True)) for r in rows}


@pytest.fixture
def daemon(tmp_path: Path) -> Any:
    paths = merged_fixtures(tmp_path / "fixtures")
    paths.config_dir.mkdir(parents=True, exist_ok=True)  # one budget: the page shows its state
    with paths.config_file.open("a") as config:
        config.write('\n[[budget.limits]]\nname = "daily"\nusd = 1000\nperiod = "day"\n')
    port = free_port()
    log = tmp_path / "daemon.log"
    process = start_daemon(paths, port, log)
    try:
        _wait_collected(paths, process, log)
        yield paths, port
    finally:
        stop_gently(process)


def _start_a_live_session(base: str, token: str) -> None:
    """A SessionStart hook posted now; returns once the daemon lists the session."""
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    body = json.dumps({"session_id": "live-now-1", "hook_event_name": "SessionStart", "source": "startup"}).encode()
    post = urllib.request.Request(f"{base}/v1/hooks/claude-code?event=SessionStart", data=body, method="POST",
                                  headers={"X-Agent-Collector-Token": token, "Content-Type": "application/json"})
    with opener.open(post, timeout=10) as answer:
        assert answer.status == 200

    def listed() -> bool:
        ask = urllib.request.Request(f"{base}/v1/sessions", headers={"X-Agent-Collector-Token": token})
        with opener.open(ask, timeout=10) as answer:
            return any(s.get("session_id") == "live-now-1" and s.get("live") for s in json.load(answer)["sessions"])

    deadline = time.time() + 60
    while not listed():
        assert time.time() < deadline, "the posted session never became live"
        time.sleep(0.2)


class _Recording(SimpleHTTPRequestHandler):
    """A plain local server that keeps the headers of every request it gets."""

    seen: list[dict[str, str]]

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.seen.append({k.lower(): v for k, v in self.headers.items()})
        if self.path.startswith("/probe"):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"probe")
            return
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _serve_attack(folder: Path) -> tuple[ThreadingHTTPServer, int, list[dict[str, str]]]:
    folder.mkdir()
    (folder / "attack.html").write_text(ATTACK)
    seen: list[dict[str, str]] = []
    handler = type("Recording", (_Recording,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, int(server.server_address[1]), seen


def _profile_cookies(profile: Path) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for store in profile.rglob("Cookies"):
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        try:
            found += db.execute("SELECT host_key, name FROM cookies").fetchall()
        except sqlite3.Error:
            pass
        finally:
            db.close()
    return found


def test_dashboard_in_chromium(daemon: tuple[Paths, int], tmp_path: Path) -> None:
    from collector.ingest.secret import read_token

    paths, port = daemon
    token = read_token(paths)
    assert token
    browser = Browser(tmp_path)
    base = f"http://127.0.0.1:{port}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "dashboard.png"
    shot.unlink(missing_ok=True)
    link, first_code = login_link(paths, port)
    assert token not in link
    browser.run(link, f"--screenshot={shot}")
    assert shot.stat().st_size > 20_000

    _start_a_live_session(base, token)  # the fixtures' sessions are history, none of them live now
    assert 'data-loaded="error"' in browser.run(link, "--dump-dom"), "a used link logs nobody in"
    link, second_code = login_link(paths, port)  # a new browser process: a new tab, a new login
    dom = browser.run(link, "--dump-dom")
    assert 'data-loaded="1"' in dom, dom[-3000:]
    shown = shown_values(dom)
    truth = _store_by_agent(paths)
    assert set(truth) == {"claude-code", "codex", "gemini-cli", "qwen-code", "opencode"}
    for agent, numbers in truth.items():
        for field, value in numbers.items():
            assert shown[f"agent:{agent}:{field}"] == f"{value:,}", (agent, field)
    assert shown["total:calls"] == f"{sum(n['calls'] for n in truth.values()):,}"
    from support.usage import report

    costs = {r["key"]: r["cost_usd"] for r in report(paths, "agent")["rows"]}
    for agent, cost in costs.items():
        cell = shown[f"agent:{agent}:cost_usd"]
        assert cell == ("unpriced" if cost is None else f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"), agent
    assert shown["sessions:count"] == "1", "only the session active now is live, not the day-old history"
    assert shown["budget:state"] == "ok", "the daemon's one budget, far from its amount today"
    assert shown["session:live-now-1:status"] == "idle"
    assert dom.count('data-k="failure"') >= 5, "the failing_command cases' tool failures are listed"
    assert shown["repo::calls"] == shown["branch::calls"] == shown["total:calls"], "no fixture is in a repository"
    link, _ = login_link(paths, port, "?days=366&branch=no-such-branch")  # the page asks /v1/usage for the branch
    narrowed = shown_values(browser.run(link, "--dump-dom"))
    assert narrowed["total:calls"] == "0" and "agent:codex:calls" not in narrowed

    attack, attack_port, seen = _serve_attack(tmp_path / "attacker")
    try:
        for origin in (f"http://127.0.0.1:{attack_port}", f"http://localhost:{attack_port}"):
            page = browser.run(f"{origin}/attack.html?target={base}", "--dump-dom")
            out = html.unescape(re.search(r'<pre id="out">(.*?)</pre>', page, re.S).group(1))  # type: ignore[union-attr]
            assert "cors: blocked" in out and "page: blocked" in out and "own: read probe" in out, out
            assert "no-cors: read type=opaque body=\n" in out + "\n", "an opaque answer: nothing readable"
            assert '"calls"' not in out and "claude-code" not in out
    finally:
        attack.shutdown()
    assert len(seen) >= 4, seen
    secrets = (token, first_code, second_code)
    for headers in seen:
        assert "cookie" not in headers and "authorization" not in headers, headers
        assert not [k for k in headers if k.startswith("x-agent-collector")], headers
        assert not [v for v in headers.values() for secret in secrets if secret in v], headers
    assert _profile_cookies(browser.profile) == [], "the browser keeps no cookie of ours"
    page = browser.run(f"{base}/dashboard/?days=366", "--dump-dom")
    assert 'data-loaded="error"' in page and "not logged in" in page, \
        "nothing the browser kept logs it in again: a new tab needs a new link"
    import http.client
    import json

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/v1/status", headers={"X-Agent-Collector-Token": token})
    counts = json.loads(conn.getresponse().read())["ingest"]["requests"]
    conn.close()
    assert counts.get("rejected_403", 0) >= 4, counts
