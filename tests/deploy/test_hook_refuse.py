"""The hook script's refusal (hard budget limits, docs/budgets.md): with <spool>/.refuse/<agent>.<event>
unexpired it writes its line as always, prints the reason on stderr and exits with the file's code, under
bash 5 and under the POSIX fallback; anything else (another event, an expired or garbled file, no file)
exits 0 with nothing on stderr. Nothing ever goes to stdout."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from support import ROOT

SCRIPT = ROOT / "hooks" / "agent-collector-hook.sh"
PAYLOAD = b'{"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": "hi"}'
MODES = {"bash": ["bash"], "posix": ["sh"]}


def hook(spool: Path, mode: str, event: str = "UserPromptSubmit") -> subprocess.CompletedProcess[bytes]:
    env = {"PATH": os.environ["PATH"], **({"AGENT_COLLECTOR_HOOK_NO_BASH": "1"} if mode == "posix" else {})}
    return subprocess.run([*MODES[mode], str(SCRIPT), "claude-code", event, str(spool)], input=PAYLOAD,
                          capture_output=True, env=env, timeout=30, check=False)


def lines(spool: Path) -> list[dict]:
    return [json.loads(x) for f in sorted((spool / "claude-code").glob("*.jsonl")) for x in f.read_text().splitlines()]


def refuse(spool: Path, body: str) -> None:
    (spool / ".refuse").mkdir(parents=True, exist_ok=True)
    (spool / ".refuse" / "claude-code.UserPromptSubmit").write_text(body)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_an_unexpired_file_refuses_that_event_only(tmp_path: Path, mode: str) -> None:
    refuse(tmp_path, f"{int(time.time()) + 60} 2\nagent-collector: budget 'daily' (day) reached\n")
    done = hook(tmp_path, mode)
    assert (done.returncode, done.stdout, done.stderr) == (2, b"", b"agent-collector: budget 'daily' (day) reached\n")
    other = hook(tmp_path, mode, "Stop")
    assert (other.returncode, other.stdout, other.stderr) == (0, b"", b"")
    assert [(x["event"], x["payload"]["prompt"] if x["event"] == "UserPromptSubmit" else None)
            for x in lines(tmp_path)] == [("UserPromptSubmit", "hi"), ("Stop", None)], "the lines are written anyway"


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("body", ["{past} 2\nexpired\n", "soon 2\nno number\n", "{future} two\nbad code\n", ""])
def test_an_expired_or_garbled_file_refuses_nothing(tmp_path: Path, mode: str, body: str) -> None:
    refuse(tmp_path, body.format(past=int(time.time()) - 1, future=int(time.time()) + 60))
    done = hook(tmp_path, mode)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert len(lines(tmp_path)) == 1
