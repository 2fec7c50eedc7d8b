"""Agent definitions: built-ins validate; overrides deep-merge or add; bad files are reported and skipped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support import ROOT, make_paths

from collector.daemon.plugins import load_agents
from collector.definitions import detect, load_definitions


def test_builtin_definitions_are_valid() -> None:
    result = load_definitions(None)
    assert not result.problems, [str(p) for p in result.problems]
    assert "claude-code" in result.agents
    for defn in result.agents.values():
        assert defn.sources, f"{defn.id} has no source"


def test_override_deep_merges_and_new_id_adds(tmp_path: Path) -> None:
    (tmp_path / "claude.json").write_text(json.dumps({"id": "claude-code", "content_capture": True,
                                                       "detect": {"paths": ["/opt/claude"]}}))
    new = {"id": "my-agent", "name": "Mine", "parser": "claude_code", "detect": {"commands": ["mine"]},
           "integrations": [], "sources": [{"kind": "spool"}]}
    (tmp_path / "mine.json").write_text(json.dumps(new))
    result = load_definitions(tmp_path)
    assert not result.problems
    claude = result.agents["claude-code"]
    assert claude.content_capture is True
    assert claude.raw["detect"]["paths"] == ["/opt/claude"]
    assert claude.raw["detect"]["commands"] == ["claude"], "sibling keys survive the merge"
    assert claude.integrations[0]["kind"] == "http_plugin_dir", "the default variant: the drop-in plugin"
    assert result.agents["my-agent"].name == "Mine"


def test_bad_files_are_reported_with_path_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "wrong.json").write_text(json.dumps({"id": "bad-agent", "name": "x", "parser": "claude_code",
                                                      "detect": {}, "integrations": [{"kind": "teleport"}],
                                                      "sources": []}))
    (tmp_path / "clobber.json").write_text(json.dumps({"id": "claude-code", "sources": "nope"}))
    result = load_agents(tmp_path)
    problems = {(Path(p.file).name, p.json_path) for p in result.problems}
    assert ("broken.json", "$") in problems
    assert ("wrong.json", "$.integrations[0].kind") in problems, "no plug-in registers that integration kind"
    assert any(f == "clobber.json" and path == "$.sources" for f, path in problems)
    assert "bad-agent" not in result.agents
    assert result.agents["claude-code"].sources[0]["kind"] == "spool", "a broken override leaves the built-in"
    assert all(p.reason for p in result.problems)


def test_detect_by_path_and_command(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    claude = load_definitions(None).agents["claude-code"]
    assert not detect(claude, paths, env={"PATH": str(tmp_path / "bin")}).installed
    (paths.home / ".claude").mkdir(parents=True)
    assert not detect(claude, paths, env={"PATH": str(tmp_path / "bin")}).installed, "an empty folder"
    (paths.home / ".claude" / "settings.json").write_text("{}\n")
    found = detect(claude, paths, env={"PATH": str(tmp_path / "bin")})
    assert found.installed and found.found_paths == (str(paths.home / ".claude"),)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text("#!/bin/sh\n")
    (bin_dir / "claude").chmod(0o755)
    assert detect(claude, paths, env={"PATH": str(bin_dir)}).found_commands == (str(bin_dir / "claude"),)


def test_cli_agents_list_and_detect_json(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text("{}\n")
    (tmp_path / ".config" / "opencode").mkdir(parents=True)  # empty: left by some tool, not OpenCode
    run = [sys.executable, "-m", "collector", "agents"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    listed = subprocess.run(run + ["list", "--json", "--home", str(tmp_path)], capture_output=True, env=env,
                            cwd=ROOT, check=True)
    assert "claude-code" in json.loads(listed.stdout)
    detected = subprocess.run(run + ["detect", "--json", "--home", str(tmp_path)], capture_output=True, env=env,
                              cwd=ROOT, check=True)
    assert json.loads(detected.stdout)["claude-code"]["installed"] is True
    assert json.loads(detected.stdout)["opencode"]["installed"] is False
    table = subprocess.run(run + ["detect", "--home", str(tmp_path)], capture_output=True, env=env, cwd=ROOT,
                           check=True, text=True)
    assert table.stdout.splitlines()[0].split()[:2] == ["AGENT", "INSTALLED"]
