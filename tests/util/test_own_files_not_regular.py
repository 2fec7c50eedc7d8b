"""A directory or a FIFO where one of our own files should be (the checkpoint store, the lock, config.toml,
today's output file) is one clear error line and a non-zero exit, never a traceback or a hang (issue 22,
item 7). Each case runs the real `collect --once` under a timeout."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import ROOT

DAY = time.strftime("%Y-%m-%d", time.gmtime())
CASES = [("data/state/checkpoints.sqlite", "dir"), ("data/state/collector.lock", "fifo"), ("cfg/config.toml", "fifo"),
         ("cfg/config.toml", "dir"), (f"data/output/activity-{DAY}.jsonl", "dir"),
         (f"data/output/activity-{DAY}.jsonl", "fifo")]


@pytest.mark.parametrize(("where", "kind"), CASES)
def test_a_non_regular_file_of_ours_is_one_clear_error(tmp_path: Path, where: str, kind: str) -> None:
    for sub in ("home", "data/state", "data/output", "cfg", "data/spool/claude-code"):
        (tmp_path / sub).mkdir(parents=True, exist_ok=True)
    (tmp_path / "data/spool/claude-code" / f"claude-code-{DAY}.jsonl").write_text(
        '{"ts":1796040000.0,"agent":"claude-code","event":"Stop","payload":{"session_id":"s","hook_event_name":'
        '"Stop"}}\n')
    odd = tmp_path / where
    odd.mkdir() if kind == "dir" else os.mkfifo(odd)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_COLLECTOR_")}
    env.update(HOME=str(tmp_path / "home"), AGENT_COLLECTOR_DATA_DIR=str(tmp_path / "data"),
               AGENT_COLLECTOR_CONFIG_DIR=str(tmp_path / "cfg"))
    done = subprocess.run([sys.executable, "-m", "collector", "collect", "--once", "-q"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("agent-collector: error:")]
    assert len(errors) == 1 and str(odd) in errors[0], done.stderr
    assert "a directory" in errors[0] or "a FIFO" in errors[0] or "not a regular file" in errors[0]
