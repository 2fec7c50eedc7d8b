"""The detail reports through the real command line: a real Claude Code session with a subagent collected by the
real ``collect --once``, then ``report tools|session ID|models --compare|findings`` as a user runs them, as JSON
and as text, against the fixture's own records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from support import FIXTURES, ROOT, prepare_fixture, usage_tuple
from support.collect_once import collect_cli

from collector.paths import Paths

CASE = FIXTURES / "claude-code" / "subagent"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Paths:
    paths = prepare_fixture(CASE, tmp_path_factory.mktemp("detail"))
    collect_cli(paths)
    return paths


def _run(paths: Paths, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_COLLECTOR_")}
    env.update({"HOME": str(paths.home), "AGENT_COLLECTOR_DATA_DIR": str(paths.data_dir),
                "AGENT_COLLECTOR_CONFIG_DIR": str(paths.config_dir), "TZ": "UTC"})
    return subprocess.run([sys.executable, "-m", "collector", "report", *args, "--home", str(paths.home)],
                          env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)


def _json(paths: Paths, *args: str) -> dict[str, Any]:
    done = _run(paths, *args, "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _served() -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in (CASE / "response_usage.jsonl").read_text().splitlines() if x.strip()]
    return [d for d in lines if d.get("kind") == "response_usage"]


def test_session_by_a_start_of_its_id_turn_by_turn(home: Paths) -> None:
    expected = json.loads((CASE / "expected.json").read_text())
    session = expected["sessions"][0]
    report = _json(home, "session", session[:8])
    assert report["session"] == session and report["report"] == "session"
    assert [t["turn_id"] for t in report["rows"]] == expected["turns"]
    served = _served()
    assert report["total"]["calls"] == len(served)
    assert report["total"]["input_tokens"] == sum(usage_tuple(r["api"], r["usage"])[0] for r in served)
    (subagent,) = [s for t in report["rows"] for s in t["subagents"]]
    assert subagent["id"] in expected["subagents"]
    text = _run(home, "session", session[:8]).stdout
    assert f"subagent {subagent['id']}" in text and "turn 2" in text


def test_tools_models_and_findings_as_json_and_text(home: Paths) -> None:
    expected = json.loads((CASE / "expected.json").read_text())
    tools = _json(home, "tools")
    assert sorted(r["tool"] for r in tools["rows"]) == sorted(t["name"] for t in expected["tools"].values())
    models = _json(home, "models", "--compare")
    assert [r["model"] for r in models["rows"]] == sorted({r["model"] for r in _served()})
    assert models == {**_json(home, "model", "--compare"), "generated_unix": models["generated_unix"]}
    findings = _json(home, "findings", "--dominant-tokens", "1")
    assert [f["kind"] for f in findings["rows"]] == ["dominant_tool"]
    assert findings["rows"][0]["tool"] == tools["rows"][0]["tool"], "the tool with the largest context cost"
    assert "Context tok~" in _run(home, "tools").stdout
    assert "Turns/task" in _run(home, "models", "--compare").stdout
    assert "No findings" in _run(home, "findings").stdout


def test_a_session_that_is_not_there_or_an_id_elsewhere_is_refused(home: Paths) -> None:
    missing = _run(home, "session", "nope")
    assert missing.returncode == 1 and "no session 'nope'" in missing.stderr
    stray = _run(home, "daily", "abc")
    assert stray.returncode == 2 and "an ID goes with report session, not report daily" in stray.stderr
    bad = _run(home, "findings", "--retry-at", "0")
    assert bad.returncode == 1 and "--retry-at must be at least 1" in bad.stderr
