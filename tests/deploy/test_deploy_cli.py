"""`agent-collector install | uninstall | agents disable | agents enable`, through the real entry point."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from support.deploy import agent_snapshot, clear_env, make_home, paths_for, snapshot

from collector.cli import deploy_cmd
from collector.cli.main import main
from collector.deploy.choices import is_disabled


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    clear_env(monkeypatch)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no real agent commands: detection by files only
    return make_home(tmp_path)


def test_register_on_a_fresh_parser() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    deploy_cmd.register(sub)
    args = parser.parse_args(["install", "--agent", "codex", "--agent", "qwen-code", "--dry-run"])
    assert args.agent == ["codex", "qwen-code"] and args.dry_run and args.func is deploy_cmd.cmd_install
    agents = argparse.ArgumentParser().add_subparsers()
    deploy_cmd.register_agent_subcommands(agents)
    assert set(agents.choices) == {"disable", "enable"}


def test_install_all_detected_then_uninstall(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = paths_for(home)
    original = agent_snapshot(home, paths)
    assert main(["install", "--home", str(home)]) == 0
    captured = capsys.readouterr()
    out = captured.out
    for agent in ("claude-code", "codex", "gemini-cli", "qwen-code", "opencode"):
        assert f"{agent}: " in out
    assert "note: codex settings_hooks: untrusted" in out and "/hooks" in out
    assert "warning: codex: conflict" in captured.err and "notify is already set" in captured.err
    assert main(["uninstall", "--home", str(home)]) == 0
    assert agent_snapshot(home, paths) == original


def test_install_says_what_each_file_is(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["install", "--home", str(home), "--agent", "claude-code", "--agent", "opencode"]) == 0
    out = capsys.readouterr().out
    assert "plugin.json: plugin file plugin.json" in out and "hooks.json: plugin file hooks.json" in out
    assert "agent-collector.js: plugin file" in out and "?" not in out


@pytest.mark.parametrize("command", [["install"], ["uninstall"], ["status"], ["agents", "detect"],
                                     ["collect", "--once"], ["run"], ["sessions"], ["config", "show"],
                                     ["service", "status"]])
def test_a_home_that_does_not_exist_is_an_error(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-home"
    assert main([*command, "--home", str(missing)]) == 2
    assert f"--home {missing}: no such directory" in capsys.readouterr().err
    assert not missing.exists(), "nothing was created"


def test_dry_run_changes_nothing_and_says_would(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(home)
    assert main(["install", "--home", str(home), "--dry-run"]) == 0
    assert snapshot(home) == before
    assert "would update" in capsys.readouterr().out


def test_one_broken_agent_fails_the_exit_code_but_the_others_install(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / ".gemini" / "settings.json").write_text("{ nope")
    assert main(["install", "--home", str(home)]) == 1
    captured = capsys.readouterr()
    assert "error: gemini-cli: error" in captured.err and "settings.json" in captured.err
    assert "agent-collector-hook.sh" in (home / ".qwen" / "settings.json").read_text()
    plugin = home / ".claude" / "skills" / "agent-collector" / ".claude-plugin" / "plugin.json"
    assert json.loads(plugin.read_text())["metadata"]["managedBy"] == "agent-collector"  # the default variant


def test_unknown_agent_is_a_usage_error(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["install", "--home", str(home), "--agent", "nope"]) == 2
    assert "unknown agent(s): nope" in capsys.readouterr().err


def test_json_output(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["install", "--home", str(home), "--agent", "qwen-code", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["changes"][0]["agent"] == "qwen-code" and data["changes"][0]["action"] == "update"


def test_disable_uninstalls_and_install_then_skips_until_enable(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = paths_for(home)
    settings = home / ".qwen" / "settings.json"
    original = settings.read_bytes()
    assert main(["install", "--home", str(home)]) == 0
    assert main(["agents", "disable", "qwen-code", "--home", str(home)]) == 0
    assert is_disabled(paths, "qwen-code") and settings.read_bytes() == original
    capsys.readouterr()
    assert main(["install", "--home", str(home)]) == 0
    assert settings.read_bytes() == original  # default install leaves a disabled agent alone
    assert main(["install", "--home", str(home), "--agent", "qwen-code"]) == 1
    assert "disabled by you" in capsys.readouterr().err
    assert main(["agents", "enable", "qwen-code", "--home", str(home)]) == 0
    assert not is_disabled(paths, "qwen-code") and b"agent-collector-hook.sh" in settings.read_bytes()


def test_agents_enable_and_disable_answer_json(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`agents enable --json` was refused; both now print one JSON document a program can read."""
    settings = home / ".qwen" / "settings.json"
    original = settings.read_bytes()
    assert main(["install", "--home", str(home)]) == 0
    capsys.readouterr()
    assert main(["agents", "disable", "qwen-code", "--home", str(home), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["agent"] == "qwen-code" and out["enabled"] is False and out["changed"] is True
    assert any(c["file"] == str(settings) for c in out["changes"]) and settings.read_bytes() == original
    assert main(["agents", "enable", "qwen-code", "--home", str(home), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["enabled"] is True and out["changed"] is True and out["changes"]
    assert b"agent-collector-hook.sh" in settings.read_bytes()


def test_install_agent_agentty_copies_the_panel_only_when_agentty_is_present(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = home / ".agentty" / "plugins" / "agent-collector"
    assert main(["install", "--home", str(home), "--agent", "agentty"]) == 0
    assert not target.exists(), "no Agentty here: nothing copied"
    (home / ".agentty").mkdir()
    assert main(["install", "--home", str(home), "--agent", "agentty"]) == 0
    assert (target / "agentty_panel.py").exists()
    assert not (home / ".claude" / "skills").exists(), "--agent agentty installs the panel alone"
    assert main(["uninstall", "--home", str(home), "--agent", "agentty"]) == 0
    assert not target.exists()
    assert "agentty" in capsys.readouterr().out


def test_the_users_own_cline_hook_leaves_cline_unhooked_whole_and_install_goes_on(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 23 item 6: one event file of Cline's hooks folder is the user's own executable. Nothing of
    Cline's integration is written (never half-hooked), the warning names the file, the other agents are
    deployed, install exits 0, twice (and --dry-run too); the user's file is untouched."""
    own = home / ".cline" / "hooks" / "PreToolUse"
    own.parent.mkdir(parents=True)
    own.write_text("#!/bin/sh\necho mine\n")
    own.chmod(0o755)
    for args in (["install"], ["install", "--dry-run"], ["install"]):
        assert main([*args, "--home", str(home)]) == 0
        captured = capsys.readouterr()
        assert f"warning: cline: conflict {own}" in captured.err and "none of that integration's" in captured.err
        assert "claude-code: " in captured.out
    assert sorted(p.name for p in own.parent.iterdir()) == ["PreToolUse"]
    assert own.read_text() == "#!/bin/sh\necho mine\n"
    assert main(["uninstall", "--home", str(home)]) == 0
    assert main(["uninstall", "--home", str(home)]) == 0, "uninstall twice: nothing left to do, still 0"


def test_no_integration_holds_the_ingest_secret(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """#22: the token is never written into an agent's configuration: hooks spool (no network), the
    Agentty panel names the token file. Every file install writes or changes is searched for it."""
    from collector.ingest.secret import ensure_token

    paths = paths_for(home)
    token = ensure_token(paths)
    (home / ".agentty").mkdir(exist_ok=True)  # Agentty present: its panel is copied too
    before = {p: p.stat().st_mtime_ns for p in home.rglob("*") if p.is_file()}
    assert main(["install", "--home", str(home)]) == 0
    capsys.readouterr()
    state = paths.state_dir.resolve()
    written = [p for p in home.rglob("*") if p.is_file() and before.get(p) != p.stat().st_mtime_ns
               and state not in p.resolve().parents]
    assert len(written) >= 5, written  # the five agents' hooks or plugins, at least
    holding = [str(p) for p in written if token.encode() in p.read_bytes()]
    assert holding == [], f"the ingest token written into {holding}"
    assert main(["uninstall", "--home", str(home)]) == 0
