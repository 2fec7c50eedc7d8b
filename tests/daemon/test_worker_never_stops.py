"""The delivery worker never stops the daemon on data, and a daemon that must stop exits non-zero (issue 34
item 2, issue 22 item 3): the OpenCode row whose watermark is a BLOB under the real daemon (it keeps
running, every other entry arrives once, status counts the row); a part of a commit the checkpoint store
cannot write is left out and counted while the rest is committed; a real fatal error in the worker (an
installed exporter plug-in that raises outside any entry) makes `agent-collector run` exit 1."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

from support import FIXTURES, assert_no_duplicates, prepare_fixture, read_output
from support.collect_once import collect_cli
from support.robust import Daemon, wait_status

from collector.daemon.delivery import Delivery
from collector.state.checkpoints import CheckpointStore, Commit, SessionRow

OPENCODE = FIXTURES / "opencode" / "tool_then_answer"
DB = ".local/share/opencode/opencode.db"
DERIVED = ("session.status", "session.end")
BLOB_ROW = "INSERT INTO message SELECT 'msg_zzbad', session_id, time_created, x'ff', data FROM message LIMIT 1"


def test_a_blob_watermark_row_under_the_daemon_stops_nothing(tmp_path: Path) -> None:
    clean = prepare_fixture(OPENCODE, tmp_path / "clean")
    collect_cli(clean)
    # the records' own entries (session.status/end are the status tracker's, made by time, not by record)
    whole = Counter(e["event.id"] for e in read_output(clean.output_dir) if e["event.name"] not in DERIVED)
    (tmp_path / "d").mkdir()
    daemon = Daemon(tmp_path / "d", {"AGENT_COLLECTOR_INGEST__ENABLED": "false"})
    shutil.rmtree(daemon.home)
    shutil.copytree(OPENCODE / "home", daemon.home, symlinks=True)
    db = sqlite3.connect(daemon.home / DB)
    with db:
        db.execute(BLOB_ROW)
    db.close()
    daemon.start_quiet()
    try:
        reason = "boundary: the message row's watermark time_updated is a BLOB, not a number"
        status = wait_status(daemon, lambda s: (s.get("quarantine") or {}).get("by_source", {}).get(
            "opencode:sqlite", {}).get(reason) == 1)
        entries = daemon.wait_output(lambda es: whole.keys() <= {e["event.id"] for e in es})
        assert_no_duplicates(entries)
        assert Counter(e["event.id"] for e in entries if e["event.name"] not in DERIVED) == whole
        assert status["delivery"]["state"] == "ok"
        cycles = daemon.status_file()["cycles"]  # several more cycles over the same row: not refused again
        later = wait_status(daemon, lambda s: s.get("cycles", 0) >= cycles + 5, timeout=120)
        assert later["quarantine"]["by_source"]["opencode:sqlite"][reason] == 1
    finally:
        rc = daemon.stop()
    assert rc == 0, daemon.log()[-3000:]


def test_a_part_the_store_cannot_write_is_left_out_and_the_rest_committed(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "checkpoints.sqlite")
    delivery = Delivery([], store)
    commit = Commit(positions={"good": {"offset": 5}, "bad": {"offset": 1 << 70}},
                    seen_ids=["e1", "e2"], kv={"fine": 1, "odd": {"path": "caf\udce9"}},
                    sessions=[SessionRow("status", "s1", {"n": 1}), SessionRow("status", "s2", {"n": 1 << 64})])
    assert delivery.deliver([], commit)
    assert store.positions() == {"good": {"offset": 5}}
    assert store.get("fine") == 1 and store.get("odd") is None
    assert delivery.status()["unsaved"] == {"position": 1, "state": 1, "session state": 1}
    assert "the status state of session 's2'" in str(delivery.status()["last_unsaved"])
    assert delivery.status()["state"] == "ok" and delivery.stats.batches == 1
    store.close()


FATAL = '''
from collector.registry import Plugin


class Fatal:
    """Takes every batch; its mark (saved with each checkpoint) fails: not any entry's doing."""

    name = "fatal"

    def export(self, batch):
        pass

    def mark(self):
        raise RuntimeError("the probe's own state is gone")

    def shutdown(self):
        pass

    def stats(self):
        return {}


EXPORTER = Plugin("fatal", lambda config, ctx: [Fatal()])
'''


def test_a_fatal_worker_error_makes_run_exit_1(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "fatal_exporter-1.0.dist-info").mkdir(parents=True)
    (site / "fatal_exporter.py").write_text(textwrap.dedent(FATAL))
    (site / "fatal_exporter-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: fatal-exporter\n"
                                                                      "Version: 1.0\n")
    (site / "fatal_exporter-1.0.dist-info" / "entry_points.txt").write_text(
        "[agent_collector.exporters]\nfatal = fatal_exporter:EXPORTER\n")
    daemon = Daemon(tmp_path, {"PYTHONPATH": str(site), "AGENT_COLLECTOR_INGEST__ENABLED": "false"})
    shutil.rmtree(daemon.home)
    shutil.copytree(OPENCODE / "home", daemon.home, symlinks=True)
    done = subprocess.run([sys.executable, "-m", "collector", "run", "--home", str(daemon.home), "--output",
                           str(daemon.out)], env=daemon.env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "the delivery worker failed: RuntimeError: the probe's own state is gone" in done.stderr


def test_run_deploys_nothing_unless_installed_or_asked(tmp_path: Path) -> None:
    """Issue 23 item 7: `run` from a checkout edits no agent's settings; `run --deploy` does, as `install`."""
    daemon = Daemon(tmp_path, {"AGENT_COLLECTOR_INGEST__ENABLED": "false"})
    shutil.rmtree(daemon.home)
    shutil.copytree(OPENCODE / "home", daemon.home, symlinks=True)  # OpenCode is detected: its db is there
    plugin = daemon.home / ".config" / "opencode" / "plugin" / "agent-collector.js"
    daemon.start_quiet()
    try:
        wait_status(daemon, lambda s: s.get("pipeline", {}).get("entries", 0) > 0)
    finally:
        assert daemon.stop() == 0
    assert not plugin.exists() and not (daemon.home / ".config").exists()
    assert "auto-deploy is off" in daemon.log()
    daemon.proc = subprocess.Popen([sys.executable, "-m", "collector", "run", "--deploy", "--home", str(daemon.home),
                                    "--output", str(daemon.out)], env=daemon.env, stdout=subprocess.DEVNULL,
                                   stderr=open(tmp_path / "daemon.log", "ab"))  # noqa: SIM115
    try:
        deadline = time.monotonic() + 60
        while not plugin.exists():
            assert time.monotonic() < deadline and daemon.proc.poll() is None, daemon.log()[-3000:]
            time.sleep(0.1)
    finally:
        assert daemon.stop() == 0
