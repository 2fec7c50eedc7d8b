"""The status line's own start (``collector.cli.statusline_show``): what ``install`` writes runs with no
``site`` start-up and no argparse, and answers like ``agent-collector statusline``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support import make_paths

from collector.cli.statusline_show import parse
from collector.deploy.statusline_setting import is_ours, our_setting

PAYLOAD = {"session_id": "s1", "cost": {"total_cost_usd": 0.42}, "model": {"id": "m"}}


def test_the_options_it_reads_and_the_rest_it_hands_on() -> None:
    assert parse(["--state-dir", "/s", "--agent", "a", "--format={today}", "--json"]) == {
        "state-dir": "/s", "agent": "a", "format": "{today}", "json": "1"}
    assert parse(["--help"]) is None and parse(["install"]) is None and parse(["--agent", "a"]) is None
    assert parse(["--state-dir"]) is None


def test_the_written_command_runs_without_site_and_prints_the_line(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    paths.state_dir.mkdir(parents=True)
    (paths.state_dir / "spend.json").write_text(json.dumps({"today": {"usd": 3.1}}))
    setting = our_setting(paths, "claude-code", {})
    assert is_ours(setting) and " -S " in setting["command"]
    done = subprocess.run(setting["command"], shell=True, input=json.dumps(PAYLOAD).encode(), capture_output=True,
                          timeout=30, check=True, env={"PATH": "/usr/bin:/bin"})
    fast = done.stdout.decode()
    full = subprocess.run([sys.executable, "-m", "collector.cli.statusline_cmd", "--state-dir", str(paths.state_dir)],
                          input=json.dumps(PAYLOAD).encode(), capture_output=True, timeout=30, check=True).stdout
    assert fast == full.decode() and fast.startswith("$0.42 session | $3.10 today"), fast


def test_help_still_explains_itself(tmp_path: Path) -> None:
    setting = our_setting(make_paths(tmp_path), "claude-code", {})
    command = setting["command"].split(" --state-dir")[0] + " --help"
    done = subprocess.run(command, shell=True, capture_output=True, timeout=30, check=False)
    assert done.returncode == 0 and b"status-line" in done.stdout, done.stderr
