"""scripts/test.sh (what .ci/run runs) gives pytest a fresh empty HOME and fails when a test leaves
anything in it, even when every test passed; a clean run passes and the real HOME is never seen."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from support import ROOT

LEAKY = '''
import os
from pathlib import Path

def test_writes_into_home():
    (Path(os.environ["HOME"]) / ".config" / "opencode").mkdir(parents=True)
'''
CLEAN = '''
import os
from pathlib import Path

def test_sees_a_fresh_home():
    home = Path(os.environ["HOME"])
    assert home.name.startswith("agent-collector-test-home.") and not any(home.iterdir())
    assert os.environ["npm_config_cache"].endswith("/.cache/npm")
    assert "XDG_CONFIG_HOME" not in os.environ
'''


def run_script(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    case = tmp_path / "case"
    case.mkdir()
    (case / "test_case.py").write_text(body)
    real_home = tmp_path / "real-home"
    real_home.mkdir()
    env = {**os.environ, "HOME": str(real_home), "XDG_CONFIG_HOME": str(real_home / ".config"),
           "TMPDIR": str(tmp_path), "AGENT_COLLECTOR_TEST_NO_INSTALL": "1"}  # never reinstall the running .venv
    result = subprocess.run(["sh", str(ROOT / "scripts" / "test.sh"), "--rootdir", str(case), str(case)],
                            env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert not any(real_home.iterdir()), "the real HOME was touched"
    assert not list(tmp_path.glob("agent-collector-test-home.*")), "the test HOME was not removed"
    return result


def test_a_clean_suite_passes(tmp_path: Path) -> None:
    result = run_script(tmp_path, CLEAN)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "1 passed" in result.stdout


def test_anything_left_in_home_fails_the_run(tmp_path: Path) -> None:
    result = run_script(tmp_path, LEAKY)
    assert "1 passed" in result.stdout
    assert result.returncode == 1
    assert "the tests wrote into HOME" in result.stderr and "./.config/opencode" in result.stderr
