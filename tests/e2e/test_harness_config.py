"""Fast tests of the harness's config writing and environment (no agent CLIs run)."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from harness import AGENTS, agent_command, make_env, write_agent_config


@dataclass
class _Server:
    url: str = "http://127.0.0.1:4321"


SETTINGS = {
    "claude-code": ".claude/settings.json",
    "gemini-cli": ".gemini/settings.json",
    "qwen-code": ".qwen/settings.json",
    "opencode": ".config/opencode/opencode.json",
}


@pytest.mark.parametrize("agent", sorted(SETTINGS))
def test_json_config_keeps_installer_hooks(agent: str, tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    write_agent_config(agent, home, work, _Server())
    path = home / SETTINGS[agent]
    data = json.loads(path.read_text())
    data["hooks"] = {"Stop": [{"hooks": [{"type": "command", "command": "agent-collector hook"}]}]}
    path.write_text(json.dumps(data))

    write_agent_config(agent, home, work, _Server("http://127.0.0.1:9999"))
    again = json.loads(path.read_text())
    assert again["hooks"] == data["hooks"]
    if agent == "opencode":
        assert again["provider"]["fake"]["options"]["baseURL"] == "http://127.0.0.1:9999/v1"


def test_codex_config_block_is_replaced_and_foreign_text_kept(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    config = home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('notify = ["agent-collector", "notify"]\n')
    write_agent_config("codex", home, work, _Server())
    write_agent_config("codex", home, work, _Server("http://127.0.0.1:9999"))
    data = tomllib.loads(config.read_text())
    assert data["notify"] == ["agent-collector", "notify"]
    assert data["model_providers"]["fake"]["base_url"] == "http://127.0.0.1:9999/v1"
    assert data["features"] == {"hooks": True, "plugins": False}
    assert data["projects"][str(work)]["trust_level"] == "trusted"
    assert config.read_text().count("[model_providers.fake]") == 1


@pytest.mark.parametrize("agent", AGENTS)
def test_env_is_isolated(agent: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for leaked in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "HTTPS_PROXY", "CODEX_HOME"):
        monkeypatch.setenv(leaked, "leaked-from-parent")
    env = make_env(agent, tmp_path / "home", tmp_path / "work", _Server())
    assert env["HOME"] == str(tmp_path / "home")
    assert env["XDG_CONFIG_HOME"].startswith(env["HOME"])
    assert "leaked-from-parent" not in env.values()
    urls = [v for k, v in env.items() if "URL" in k or "REGISTRY" in k.upper()]
    assert all(u.startswith("http://127.0.0.1:") for u in urls), urls


def test_codex_rewrite_keeps_lines_added_inside_our_sections(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    write_agent_config("codex", home, work, _Server())
    config = home / ".codex" / "config.toml"
    # what `agent-collector install --agent codex` does: a top-level key after our last one, a new table
    text = config.read_text().replace(
        "check_for_update_on_startup = false\n",
        'check_for_update_on_startup = false\nnotify = ["hook", "notify"]\n',
    )
    config.write_text(text + '\n[hooks.state]\nx = "trusted"\n')
    write_agent_config("codex", home, work, _Server("http://127.0.0.1:9999"))
    write_agent_config("codex", home, tmp_path / "other", _Server("http://127.0.0.1:9999"))
    data = tomllib.loads(config.read_text())
    assert data["notify"] == ["hook", "notify"]
    assert data["hooks"] == {"state": {"x": "trusted"}}
    assert data["model_providers"]["fake"]["base_url"] == "http://127.0.0.1:9999/v1"
    assert set(data["projects"]) == {str(work), str(tmp_path / "other")}


def test_resume_flags() -> None:
    assert agent_command("claude-code", "p", True)[-1] == "--continue"
    assert agent_command("codex", "p", True)[1:4] == ["exec", "resume", "--last"]
    assert agent_command("gemini-cli", "p", True)[-2:] == ["--resume", "latest"]
    assert agent_command("qwen-code", "p", True)[-1] == "--continue"
    assert agent_command("opencode", "p", True)[-2:] == ["--continue", "p"]
