"""Misbehaving external agent plugins under the real daemon (`agent-collector run`): a fixture plugin
(tests/fixtures/external/misfit_plugin.py) installed under several names, each breaking one rule: it hangs
past the timeout, prints 20 MB, answers with invalid JSON, speaks protocol_version 2, hands back a
session_ref with '..' or one outside its session directory, sits in a relative PATH entry, or is named
like a built-in agent. Each gives a clear logged reason and a status line; the well-behaved plugin and the
other sources go on, and after a restart the good plugin's sessions are read on from where they were,
nothing twice. No forbidden subcommand is ever run."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, assert_no_duplicates, assert_schema_valid
from support.robust import Daemon

PLUGIN = ROOT / "tests" / "fixtures" / "external" / "misfit_plugin.py"
NAMES = ("good", "hang", "flood", "badjson", "escape", "outside", "v2", "claude-code")


def install(bin_dir: Path, name: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / f"entire-agent-{name}"
    path.write_text(f"#!{sys.executable}\n" + PLUGIN.read_text())
    path.chmod(0o755)


def transcript(path: Path, lines: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)


def daemon(tmp: Path, sessions: Path, bin_dir: Path) -> Daemon:
    path = f"relbin:{bin_dir}:/usr/bin:/bin"
    d = Daemon(tmp, {"PATH": path, "MISFIT_SESSIONS": str(sessions)})
    (tmp / "cfg").mkdir(exist_ok=True)
    (tmp / "cfg" / "config.toml").write_text(
        '[collector]\nexport_agent_fields = true\n'  # the test reads the plugin's agent.<id>.* fields
        f'[external_agents]\nenabled = true\nrepos = ["{tmp / "repo"}"]\ninterval_s = 1\ntimeout_s = 1\n')
    return d


def prompt_body(session: str, text: str) -> bytes:
    return json.dumps({"session_id": session, "hook_event_name": "UserPromptSubmit", "prompt": text,
                       "cwd": "/w"}).encode()


def test_each_misbehaviour_is_reported_and_the_rest_goes_on(tmp_path: Path) -> None:
    sessions, bin_dir = tmp_path / "sessions", tmp_path / "bin"
    (tmp_path / "repo").mkdir()
    for name in NAMES:
        install(bin_dir, name)
        transcript(sessions / name / "s1.jsonl", [{"type": "user", "text": f"hello {name}"}])
    install(tmp_path / "relbin", "rel")
    transcript(sessions / "escape" / "s1.jsonl", [])
    transcript(sessions / "secret.jsonl", [{"type": "user", "text": "not yours"}])
    transcript(sessions / "good" / "s1.jsonl", [
        {"type": "assistant", "usage": {"input": 100, "output": 20, "cache_read": 50, "cache_write": 10},
         "file": "a.py"},
        {"type": "assistant", "usage": {"input": 200, "output": 30}}])

    d = daemon(tmp_path, sessions, bin_dir).start()
    try:
        assert d.post("claude-code", prompt_body("c1", "hi")) == 200
        entries = d.wait_output(lambda es: {"good", "claude-code"} <= {e["gen_ai.agent.type"] for e in es}
                                and any(e["event.name"] == "llm.response" for e in es))
        d.wait_output(lambda es: d.status_file().get("sources", {}).get("hang:external", {}).get("breaker") == "open")
        status = d.status_file()
        cli = subprocess.run([sys.executable, "-m", "collector", "status", "--home", str(d.home)], env=d.env,
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
    finally:
        assert d.stop() == 0
    log = d.log()

    sources = status["sources"]
    reasons = {
        "hang:external": "get-session-dir: timed out after 1s",
        "flood:external": "get-transcript-position: stdout over 10485760 bytes",
        "badjson:external": "extract-prompts: the answer is not JSON (10 bytes)",
        "escape:external": "has a '.' or '..' component",
        "outside:external": "is outside the session directory",
    }
    for source, reason in reasons.items():
        assert reason in str(sources[source]["last_error"]), (source, sources[source])
        assert reason in log and reason in cli.stdout, source
    assert sources["hang:external"]["consecutive_failures"] >= 3
    skipped = "\n".join(status["external_agents"]["skipped"])
    for reason in ("protocol_version 2, this collector speaks 1", "PATH entry 'relbin' is not absolute",
                   "'claude-code' is an agent of agents.d"):
        assert reason in skipped and reason in log and "skipped: " in cli.stdout and reason in cli.stdout
    listed = subprocess.run([sys.executable, "-m", "collector", "agents", "list", "--home", str(d.home)],
                            env=d.env, capture_output=True, text=True, timeout=60, cwd=ROOT).stdout
    hang = next(line for line in listed.splitlines() if line.startswith("hang:external "))
    assert "open (" in hang and "failures, next in" in hang
    assert "external agents: 6 plugins over 1 repositories" in listed and "  good: " in listed
    assert sorted(status["external_agents"]["plugins"]) == ["badjson", "escape", "flood", "good", "hang", "outside"]
    assert not (sessions / "FORBIDDEN-CALLS").exists()
    assert "not yours" not in json.dumps(entries)

    good = [e for e in entries if e["gen_ai.agent.type"] == "good"]
    assert_schema_valid(good)
    response = next(e for e in good if e["event.name"] == "llm.response")
    assert (response["gen_ai.usage.input_tokens"], response["gen_ai.usage.output_tokens"],
            response["gen_ai.usage.cache_read.input_tokens"],
            response["gen_ai.usage.cache_creation.input_tokens"]) == (360, 50, 50, 10)
    assert response["agent.good.usage_scope"] == "transcript_total" and response["agent.good.api_call_count"] == 2
    prompt = next(e for e in good if e["event.name"] == "user.prompt")
    assert prompt["agent.good.modified_files"] == ["a.py"]

    transcript(sessions / "good" / "s1.jsonl", [{"type": "user", "text": "again"},
                                                {"type": "assistant", "usage": {"input": 7, "output": 3}}])
    d = daemon(tmp_path, sessions, bin_dir).start()  # a restart: the good plugin goes on from its cursor
    try:
        after = d.wait_output(lambda es: len([e for e in es if e["gen_ai.agent.type"] == "good"
                                              and e["event.name"] == "llm.response"]) == 2)
    finally:
        assert d.stop() == 0
    assert_no_duplicates(after)
    good = [e for e in after if e["gen_ai.agent.type"] == "good"]
    totals = sorted((e["gen_ai.usage.input_tokens"], e["gen_ai.usage.output_tokens"])
                    for e in good if e["event.name"] == "llm.response")
    assert totals == [(7, 3), (360, 50)]
    assert sorted(e["event.name"] for e in good) == ["llm.response", "llm.response", "session.start",
                                                     "user.prompt", "user.prompt"]


def test_hanging_plugins_delay_discovery_by_one_timeout_not_one_each(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 22 item 7: the `info` handshakes run in parallel: four plugins that hang cost one timeout."""
    from collector.external import discovery

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for n in range(4):
        plugin = bin_dir / f"entire-agent-slow{n}"
        plugin.write_text("#!/bin/sh\nexec sleep 30\n")
        plugin.chmod(0o755)
    monkeypatch.setattr(discovery, "INFO_TIMEOUT_S", 3.0)
    started = time.monotonic()
    found = discovery.discover(str(bin_dir), (), str(tmp_path), 1 << 20)
    took = time.monotonic() - started
    assert found.plugins == [] and len(found.skipped) == 4 and all("info failed" in s for s in found.skipped)
    assert took < 9, f"{took:.1f}s for 4 hanging plugins (sequential would be 12 s or more)"


def test_the_ingest_answers_before_the_plugins_are_asked(tmp_path: Path) -> None:
    """Issue 22 item 7: discovery is off the start-up path: the daemon listens first, then asks the plugins
    (a plugin whose `info` hangs costs the first cycle one timeout, never the ingest); the good plugin's
    agent joins once discovery ends."""
    bin_dir = tmp_path / "bin"
    install(bin_dir, "good")
    slow = bin_dir / "entire-agent-slowinfo"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    (tmp_path / "repo").mkdir()
    d = daemon(tmp_path, tmp_path / "sessions", bin_dir).start()  # returns once /v1/status answers
    try:
        first = d.get("/v1/status")["external_agents"]
        assert first["enabled"] and first["plugins"] == {}, "the ingest answered while the plugins were asked"
        deadline = time.monotonic() + 60
        while "good" not in d.get("/v1/status")["external_agents"]["plugins"]:
            assert time.monotonic() < deadline, d.log()
            time.sleep(0.2)
        later = d.get("/v1/status")["external_agents"]
        assert any("entire-agent-slowinfo: info failed" in s for s in later["skipped"]), later
    finally:
        assert d.stop() == 0
