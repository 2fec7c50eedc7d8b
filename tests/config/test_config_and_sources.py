"""Config file + environment overrides, and transcripts found through a hook's transcript_path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import FIXTURES, collect, make_paths, prepare_fixture

from collector.config import ConfigError, agent_setting, load_config


def test_file_then_environment(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('[content]\ncapture = true\n[ingest]\nport = 5000\n[agents.claude-code]\nenabled = false\n')
    config = load_config(cfg, env={"AGENT_COLLECTOR_INGEST__PORT": "5001",
                                   "AGENT_COLLECTOR_AGENTS__QWEN_CODE__CONTENT_CAPTURE": "true"})
    assert config.content.capture is True
    assert config.ingest.port == 5001
    assert config.masking.enabled is True, "defaults fill the rest"
    assert agent_setting(config, "claude-code", "enabled", True) is False
    assert agent_setting(config, "qwen-code", "content_capture", False) is True


def test_bad_config_is_a_clear_error(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("[content\ncapture = ")
    with pytest.raises(ConfigError, match="config.toml"):
        load_config(cfg, env={})


def test_transcript_named_by_hook_outside_the_globs_is_not_followed(tmp_path: Path) -> None:
    """A hook names any path it likes: a transcript outside the agent's source globs is not read (the
    hooks themselves still are); tests/sources/test_hostile_files.py has the symlink and ``..`` variants."""
    case = FIXTURES / "claude-code" / "tool_then_answer"
    paths = make_paths(tmp_path)
    paths.home.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere" / "t.jsonl"
    elsewhere.parent.mkdir()
    shutil.copy(next(case.glob("home/.claude/projects/*/*.jsonl")), elsewhere)
    spool_src = next(case.glob("spool/claude-code/*.jsonl"))
    lines = []
    for line in spool_src.read_text().splitlines():
        envelope = json.loads(line)
        envelope["payload"]["transcript_path"] = str(elsewhere)
        lines.append(json.dumps(envelope))
    target = paths.spool_dir / "claude-code" / spool_src.name
    target.parent.mkdir(parents=True)
    target.write_text("\n".join(lines) + "\n")
    entries = collect(paths)
    assert sum(e["event.name"] == "llm.response" for e in entries) == 0
    assert sum(e["event.name"] == "tool.call" for e in entries) == 1  # from the hooks
    status = json.loads((paths.state_dir / "status.json").read_text())
    assert status["sources"]["claude-code:transcripts"]["refused_paths"] >= 1


def test_a_disabled_agent_is_not_collected(tmp_path: Path) -> None:
    from collector.deploy.choices import set_disabled

    case = FIXTURES / "claude-code" / "tool_then_answer"
    paths = prepare_fixture(case, tmp_path)
    set_disabled(paths, "claude-code", True)
    assert collect(paths) == []
    set_disabled(paths, "claude-code", False)
    assert len(collect(paths)) > 0


def test_only_files_that_fit_the_globs_are_followed(tmp_path: Path) -> None:
    from collector.sources.jsonl_files import JsonlFiles

    source = JsonlFiles("a:t", "a", "transcript", [str(tmp_path / "chats" / "session-*.jsonl")], {})
    assert source.add_path(str(tmp_path / "chats" / "session-1.jsonl"))
    assert not source.add_path(str(tmp_path / "elsewhere" / "session-1.jsonl")), "outside the agent's folder"
    assert not source.add_path(str(tmp_path / "chats" / "session-1.json")), "an older whole-file JSON"


def test_status_counts_today_across_restarts(tmp_path: Path) -> None:
    import json as _json

    paths = prepare_fixture(FIXTURES / "claude-code" / "tool_then_answer", tmp_path)
    written = collect(paths)
    collect(paths)  # a second process: nothing new, the day's counts remain
    status = _json.loads((paths.state_dir / "status.json").read_text())
    assert status["agents"]["claude-code"]["events_today"] == len(written) > 0
    assert status["sources"]["claude-code:hooks"]["lag_bytes"] == 0
