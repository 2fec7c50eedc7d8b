"""Private by construction: the real daemon, started under umask 000 and 022, makes every directory 0700
and every file 0600 (queue segments, state, SQLite with -wal/-shm, spool, output, config); it tightens a
loose file it finds in its own directories and says so; a symlink planted under tomorrow's output name is
refused, never followed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from support import FIXTURES
from support.waits import free_port, wait_for

from collector.exporters.base import ExportError
from collector.exporters.jsonl import JsonlExporter
from collector.sources.spool_writer import SpoolWriter
from collector.util.private import repair

SPOOL = FIXTURES / "claude-code" / "tool_then_answer" / "spool" / "claude-code"


def _modes(*roots: Path) -> dict[str, str]:
    out = {}
    for root in roots:
        for path in [root, *root.rglob("*")]:
            try:
                mode = path.lstat().st_mode
            except FileNotFoundError:  # a temporary file of an atomic write, gone between listing and stat
                continue
            out[str(path.relative_to(root.parent))] = oct(stat.S_IMODE(mode))
    return out


def _post(port: int, body: dict[str, object], token_file: Path) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/hooks/claude-code", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              "X-Agent-Collector-Token": token_file.read_text().strip()})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=5) as response:
        return int(response.status)


@pytest.mark.parametrize("umask", ["000", "022"])
def test_daemon_under_a_loose_umask_makes_only_private_files(tmp_path: Path, umask: str) -> None:
    home, data, cfg = tmp_path / "home", tmp_path / "data", tmp_path / "cfg"
    home.mkdir()
    spool = data / "spool" / "claude-code"
    spool.mkdir(parents=True)
    loose = spool / SPOOL.glob("*.jsonl").__next__().name
    shutil.copy(next(SPOOL.glob("*.jsonl")), loose)  # as a hook script under umask 022 would leave it
    os.chmod(loose, 0o644)
    os.chmod(data, 0o755)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_COLLECTOR_", "OTEL_"))}
    env.update({"HOME": str(home), "AGENT_COLLECTOR_DATA_DIR": str(data), "AGENT_COLLECTOR_CONFIG_DIR": str(cfg),
                "AGENT_COLLECTOR_INGEST__PORT": str(port), "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",
                "OTEL_EXPORTER_OTLP_TIMEOUT": "200"})
    shell = f'umask {umask} && exec "$@"'
    init = subprocess.run(["sh", "-c", shell, "sh", sys.executable, "-m", "collector", "config", "init",
                           "--home", str(home)], env=env, capture_output=True, text=True, timeout=60)
    assert init.returncode == 0, init.stderr
    proc = subprocess.Popen(["sh", "-c", shell, "sh", sys.executable, "-m", "collector", "run", "--home", str(home)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: _post(port, {"hook_event_name": "SessionStart", "session_id": "modes-1",
                                       "source": "startup"}, data / "state" / "ingest.token") == 200,
                 60, "the ingest", 0.1, (OSError,))
        output = data / "output"
        wait_for(lambda: b"modes-1" in b"".join(p.read_bytes() for p in output.glob("*.jsonl")), 60,
                 "the output", 0.1, (OSError,))
        wait_for(lambda: any((data / "queue").rglob("seg-*")), 60, "a queue segment", 0.1, (OSError,))
        running = _modes(data, cfg)  # while it runs: SQLite's -wal and -shm exist
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        finally:
            if proc.poll() is None:
                proc.kill()
    log = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == 0, log
    assert "tightened the mode of" in log, log
    modes = {**running, **_modes(data, cfg)}
    made = set(modes)
    for expected in ["data/state/checkpoints.sqlite", "data/state/checkpoints.sqlite-wal",
                     "data/state/checkpoints.sqlite-shm", "data/state/status.json", "data/state/ingest.token",
                     "cfg/config.toml", "data/spool/claude-code", "data/output"]:
        assert expected in made, f"{expected} was not made: {sorted(made)}"
    assert any(p.startswith("data/queue/") and Path(p).suffix for p in made), sorted(made)
    assert any(p.startswith("data/spool/claude-code/") and p.endswith(".http.jsonl") for p in made)
    dirs = {p for p in made if p in ("data", "cfg") or any(q.startswith(p + "/") for q in made)}
    dirs |= {"data/output", "data/spool/claude-code"}
    wrong = {p: m for p, m in modes.items() if m != ("0o700" if p in dirs else "0o600")}
    assert not wrong, wrong


def test_planted_symlink_for_tomorrows_output_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    day = time.strftime("%Y-%m-%d", time.gmtime())
    (out / f"activity-{day}.jsonl").symlink_to(victim)
    exporter = JsonlExporter(out)  # recovery must not truncate or read through it either
    with pytest.raises(ExportError, match="symlink"):
        exporter.export([{"event.id": "e1", "x": 1}])
    assert victim.read_text() == "keep me\n"


def test_planted_symlink_in_the_spool_is_refused(tmp_path: Path) -> None:
    day = time.strftime("%Y-%m-%d", time.gmtime())
    directory = tmp_path / "spool" / "codex"
    directory.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (directory / f"codex-{day}.http.jsonl").symlink_to(victim)
    writer = SpoolWriter(tmp_path / "spool")
    with pytest.raises(OSError):
        writer.append("codex", "x", {"a": 1})
    writer.close()
    assert victim.read_text() == "keep me\n"


def test_repair_tightens_our_files_only_and_never_follows_links(tmp_path: Path) -> None:
    root = tmp_path / "data"
    (root / "state").mkdir(parents=True)
    (root / "venv" / "bin").mkdir(parents=True)
    mine = root / "state" / "x.json"
    mine.write_text("{}")
    os.chmod(mine, 0o666)
    tool = root / "venv" / "bin" / "tool"
    tool.write_text("#!/bin/sh\n")
    os.chmod(tool, 0o755)
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    os.chmod(outside, 0o644)
    (root / "state" / "link").symlink_to(outside)
    changed = repair([root])
    assert mine in changed and stat.S_IMODE(mine.stat().st_mode) == 0o600
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644, "a symlink's target is not ours"
    assert stat.S_IMODE(tool.stat().st_mode) == 0o755, "the venv is skipped"
    assert repair([root]) == [], "nothing left to repair"
