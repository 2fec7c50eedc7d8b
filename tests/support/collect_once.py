"""The real `collect --once` on a fixture home, and the checks that the fixture's own records all arrived
(shared by the hostile-input tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from collector.paths import Paths
from support import FIXTURES, ROOT, assert_no_duplicates, read_output

CLAUDE = FIXTURES / "claude-code" / "tool_then_answer"


def expected_counts(case: Path) -> Counter[str]:
    return Counter(json.loads((case / "expected.json").read_text())["counts"])


def collect_cli(paths: Paths, timeout: float = 60) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_COLLECTOR_")}
    env.update({"HOME": str(paths.home), "AGENT_COLLECTOR_DATA_DIR": str(paths.data_dir),
                "AGENT_COLLECTOR_CONFIG_DIR": str(paths.config_dir)})
    done = subprocess.run([sys.executable, "-m", "collector", "collect", "--once", "--home", str(paths.home), "-q"],
                          env=env, capture_output=True, timeout=timeout, cwd=ROOT)
    assert done.returncode == 0, done.stderr.decode()
    return dict(json.loads((paths.state_dir / "status.json").read_text()))


def claude_project(paths: Paths) -> Path:
    return next((paths.home / ".claude" / "projects").iterdir())


def assert_fixture_complete(paths: Paths, case: Path = CLAUDE) -> list[dict[str, Any]]:
    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    assert Counter(e["event.name"] for e in entries) == expected_counts(case)
    return entries


def collect_clean(paths: Paths, timeout: float = 120) -> list[dict[str, Any]]:
    """``collect --once`` that must leave nothing unread or unparsed; the whole output."""
    status = collect_cli(paths, timeout=timeout)
    assert not status["pipeline"]["unreadable"] and not status["pipeline"]["parse_errors"], status["pipeline"]
    return read_output(paths.output_dir)
