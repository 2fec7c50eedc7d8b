"""Terminal output escapes control characters: a model name carrying an OSC title sequence, a BEL and a
right-to-left override reaches ``report``, ``status`` and ``doctor`` (real CLI) only escaped; ``--json``
keeps the name itself."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from support import FIXTURES, env_without_collector, prepare_fixture

from collector.paths import Paths
from collector.util.terminal import escape, escape_output

EVIL = "\x1b]0;pwn\x07\u202eclaude-sonnet-4-5"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _cli(paths: Paths, *args: str) -> str:
    env = {**env_without_collector(), "HOME": str(paths.home), "AGENT_COLLECTOR_DATA_DIR": str(paths.data_dir),
           "AGENT_COLLECTOR_CONFIG_DIR": str(paths.config_dir), "AGENT_COLLECTOR_INGEST__ENABLED": "false",
           "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-m", "collector", *args, "--home", str(paths.home)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1, 3), done.stderr
    return done.stdout


def test_escape_every_control_class() -> None:
    assert escape("a\x1bb\x07c\x9bd\x7fe\u202ef\u2066g\nh") == "a\\x1bb\\x07c\\x9bd\\x7fe\\u202ef\\u2066g\\x0ah"
    assert escape_output("x\ty\n\x1b[2J") == "x\ty\n\\x1b[2J"
    assert escape("claude-sonnet-4-5 é 中") == "claude-sonnet-4-5 é 中"


def test_model_name_with_escape_sequences_is_escaped_in_every_terminal_output(tmp_path: Path) -> None:
    paths = prepare_fixture(FIXTURES / "claude-code" / "resume12", tmp_path)
    evil_json = json.dumps(EVIL)[1:-1]
    changed = 0
    for transcript in (paths.home / ".claude").rglob("*.jsonl"):
        text = transcript.read_text()
        changed += text.count('"model":"claude-sonnet-4-5"')
        transcript.write_text(text.replace('"model":"claude-sonnet-4-5"', f'"model":"{evil_json}"'))
    assert changed > 0
    _cli(paths, "collect", "--once", "-q")
    outputs = {name: _cli(paths, *args) for name, args in {
        "report model": ("report", "model"), "report session": ("report", "session", "--breakdown"),
        "report daily": ("report", "daily", "--breakdown"), "status": ("status",), "doctor": ("doctor", "--all"),
    }.items()}
    for name, out in outputs.items():
        assert out and not RAW.search(out), f"{name} printed a raw control character: {RAW.findall(out)}"
    assert "\\x1b]0;pwn\\x07\\u202eclaude-sonnet-4-5" in outputs["report model"]
    data = json.loads(_cli(paths, "report", "model", "--json"))
    assert [row["key"] for row in data["rows"]] == [EVIL]  # JSON carries the name itself (escaped by JSON)
