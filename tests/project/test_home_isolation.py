"""`--home DIR` means that home: the caller's XDG_* and agent variables do not move agent paths elsewhere."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support import FIXTURES, read_output

from collector.cli.main import main
from collector.paths import resolve_paths


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under root with its size and mtime: what 'touched' means here."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            st = path.lstat()
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The caller's own XDG dirs and agent variables, pointing outside the home under test."""
    other = tmp_path / "elsewhere"
    for sub in ("data", "config", "state", "codex", "claude"):
        (other / sub).mkdir(parents=True)
    (other / "config" / "opencode").mkdir()  # a real-looking OpenCode config of the caller's
    (other / "config" / "opencode" / "opencode.json").write_text('{"theme": "mine"}\n')
    monkeypatch.setenv("XDG_DATA_HOME", str(other / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(other / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(other / "state"))
    monkeypatch.setenv("CODEX_HOME", str(other / "codex"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(other / "claude"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    return other


def test_paths_under_an_explicit_home_ignore_the_callers_variables(tmp_path: Path, elsewhere: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    paths = resolve_paths(home)
    assert paths.isolated
    assert paths.expand("${XDG_DATA_HOME:-~/.local/share}/opencode/opencode.db") == (
        home / ".local" / "share" / "opencode" / "opencode.db")
    assert paths.expand("${CODEX_HOME:-~/.codex}/config.toml") == home / ".codex" / "config.toml"
    # Without an explicit home the user's own variables still apply, as the agents themselves read them.
    implicit = resolve_paths(None, env={"HOME": str(home), "XDG_DATA_HOME": str(elsewhere / "data")})
    assert not implicit.isolated
    assert str(implicit.expand("${XDG_DATA_HOME:-~/.local/share}/x", env=os.environ)).startswith(str(elsewhere))


def test_collect_once_home_reads_that_homes_opencode_data(tmp_path: Path, elsewhere: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "opencode" / "tool_then_answer" / "home", home)
    before = _tree(elsewhere)
    assert main(["collect", "--once", "--home", str(home)]) == 0
    entries = read_output(resolve_paths(home).output_dir)
    sqlite_entries = [e for e in entries if e["gen_ai.agent.type"] == "opencode" and e.get("source.kind") == "sqlite"]
    assert any(e["event.name"] == "llm.response" for e in sqlite_entries), "OpenCode's database under DIR not read"
    assert _tree(elsewhere) == before


def test_install_home_dry_run_names_and_touches_only_that_home(
    tmp_path: Path, elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "opencode.json").write_text("{}\n")
    before_home, before_elsewhere = _tree(home), _tree(elsewhere)
    assert main(["install", "--home", str(home), "--agent", "opencode", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert str(home / ".config" / "opencode") in out
    assert str(elsewhere) not in out
    assert _tree(home) == before_home and _tree(elsewhere) == before_elsewhere
