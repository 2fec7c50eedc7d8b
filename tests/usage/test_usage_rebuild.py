"""A missing or damaged `usage.sqlite` is rebuilt from the JSONL output (issue 22 item 5): with the
checkpoints intact nothing is read from the agents again, yet `report` gives the same totals as before,
`status` says the store was rebuilt (why, how many entries, from which days), and further runs count
nothing twice. Real `collect --once` and `report`, in subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, ROOT, prepare_fixture
from support.collect_once import collect_cli

from collector.paths import Paths

CASE = FIXTURES / "claude-code" / "two_tools"


def _cli(paths: Paths, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_COLLECTOR_")}
    env.update({"HOME": str(paths.home), "AGENT_COLLECTOR_DATA_DIR": str(paths.data_dir),
                "AGENT_COLLECTOR_CONFIG_DIR": str(paths.config_dir)})
    return subprocess.run([sys.executable, "-m", "collector", *args], env=env, capture_output=True, text=True,
                          timeout=60, cwd=ROOT)


def _totals(paths: Paths) -> dict[str, Any]:
    done = _cli(paths, "report", "session", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    return {"total": data["total"], "rows": sorted((r["session"], r["calls"], r["input_tokens"], r["output_tokens"])
                                                  for r in data["rows"])}


@pytest.mark.parametrize("damage", ["deleted", "garbage", "truncated"])
def test_a_missing_or_damaged_store_is_rebuilt_from_the_output(tmp_path: Path, damage: str) -> None:
    paths = prepare_fixture(CASE, tmp_path)
    collect_cli(paths)
    before = _totals(paths)
    assert before["total"]["calls"] > 0
    store = paths.data_dir / "usage.sqlite"
    for suffix in ("-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    if damage == "deleted":
        store.unlink()
    elif damage == "garbage":
        store.write_bytes(os.urandom(8192))
    else:
        store.write_bytes(store.read_bytes()[:100])  # the header torn
    status = collect_cli(paths)
    assert status["pipeline"]["entries"] == 0, "nothing was read from the agent again"
    rebuilt = status["exporters"]["usage_store"]["rebuilt"]
    assert rebuilt["entries"] == rebuilt["added"] > 0 and rebuilt["files"] >= 1
    assert rebuilt["reason"] == "missing" if damage == "deleted" else rebuilt["reason"].startswith("unreadable")
    assert _totals(paths) == before
    if damage != "deleted":
        assert list(paths.data_dir.glob("usage.sqlite.corrupt-*")), "the damaged file is kept aside"
    collect_cli(paths)  # again: no second rebuild, nothing counted twice
    assert _totals(paths) == before
    shown = _cli(paths, "status")
    assert "usage store rebuilt from the JSONL output" in shown.stdout, shown.stdout
