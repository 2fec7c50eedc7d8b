"""The daemon's budget check in a real Service: a usage store that already holds today's calls, a
config.toml with [prices] and [[budget.limits]], one `collect_once`: the threshold entries in the JSONL
output (once, whatever the number of checks), spend.json for the status line, the mark in status.json,
the refusal file the hook script reads while the daemon runs and its removal when the daemon stops."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from support import assert_schema_valid, make_paths, read_output
from support.budget import call

from collector.config import load_config
from collector.daemon.budget_notify import message, post
from collector.daemon.service import Service
from collector.usage.store import UsageStore

CONFIG = """
[prices."m-test"]
input = 1.0
output = 2.0

[budget]
notify = false

[[budget.limits]]
name = "daily"
usd = 1.5
hard = true

[[budget.limits]]
name = "tokens"
tokens = 100000000
"""


def service_with_spend(tmp_path: Path) -> Service:
    paths = make_paths(tmp_path)
    paths.config_dir.mkdir(parents=True)
    paths.config_file.write_text(CONFIG)
    paths.data_dir.mkdir(parents=True)
    store = UsageStore(paths.data_dir / "usage.sqlite")
    now = time.time()
    store.add([call(1, now - 30, 1_000_000, 0), call(2, now - 20, 0, 500_000, session="s2")])  # $2 today
    store.close()
    return Service(paths, load_config(paths.config_file, env={}))


def test_a_crossed_budget_makes_one_entry_a_status_mark_and_a_refusal_while_running(tmp_path: Path) -> None:
    service = service_with_spend(tmp_path)
    service.startup()
    refusal = service.paths.spool_dir / ".refuse" / "claude-code.UserPromptSubmit"
    try:
        asyncio.run(service.collect_once())
        expires, code = refusal.read_text().splitlines()[0].split()
        assert code == "2" and int(expires) > time.time()
        assert "budget 'daily' (day) reached: $2.00 of $1.50 spent (133%)" in refusal.read_text()
        service.budget._last = -1e9  # the next cycle checks again: the same window and level make no new entry
        asyncio.run(service.collect_once())
    finally:
        service.shutdown()
    assert not refusal.exists(), "a daemon that stopped refuses nothing"
    made = [e for e in read_output(service.output_dir) if e["event.name"] == "budget.threshold"]
    assert_schema_valid(made)
    assert [(e["budget.name"], e["budget.level"], e["budget.spent"], e["budget.hard"]) for e in made] == [
        ("daily", "over", 2.0, True)]
    spend = json.loads((service.paths.state_dir / "spend.json").read_text())
    assert spend["today"]["usd"] == 2.0 and spend["sessions"] == {"claude-code s1": 1.0, "claude-code s2": 1.0}
    assert [b["level"] for b in spend["budgets"]] == ["over", "ok"]
    status = json.loads((service.paths.state_dir / "status.json").read_text())
    assert [c["name"] for c in status["budget"]["crossed"]] == ["daily"] and status["budget"]["limits"] == 2


def test_the_webhook_gets_the_entry_and_its_message() -> None:
    bodies: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    entry = {"budget.name": "daily", "budget.period": "day", "budget.unit": "usd", "budget.amount": 1.5,
             "budget.spent": 2.0, "budget.fraction": 1.3333, "budget.level": "over"}
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        post(f"http://127.0.0.1:{server.server_address[1]}/budget", entry)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert [json.loads(b) for b in bodies] == [{"text": message(entry), "entry": entry}]


def test_a_webhook_that_is_down_is_logged_not_raised(caplog) -> None:
    post("http://127.0.0.1:9/none", {"budget.name": "d", "budget.period": "day", "budget.unit": "tokens",
                                     "budget.amount": 10, "budget.spent": 9, "budget.fraction": 0.9,
                                     "budget.level": "warn"})
    assert "budget webhook http://127.0.0.1:9/none failed" in caplog.text
