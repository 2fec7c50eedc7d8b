"""Git attributes on every entry: real repositories made by `git` (a main working tree on one branch, a
linked worktree on another, an scp-style remote with credentials nowhere), read from the `.git` files; a
branch switch seen after the recheck; hostile `.git` contents give no attributes and no crash; and the
daemon's pipeline stamps them on the entries `collect --once` writes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support import make_paths, read_output
from support.collect_once import collect_cli

from collector.pipeline.git_attributes import GitAttributes
from collector.util.git_url import normalise

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True,
                          check=True, timeout=60)
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    main = tmp_path / "app"
    main.mkdir()
    git(main, "init", "-q", "-b", "main")
    git(main, "remote", "add", "origin", "git@github.com:Acme/app.git")
    (main / "f").write_text("x")
    git(main, "add", "f")
    git(main, "commit", "-q", "-m", "one")
    git(main, "worktree", "add", "-q", "-b", "feature/x", str(tmp_path / "app-x"))
    return main


def test_main_tree_and_linked_worktree(repo: Path) -> None:
    facts = GitAttributes()
    main = facts.attributes(str(repo))
    assert main["vcs.repository.url.full"] == "https://github.com/Acme/app"
    assert main["vcs.repository.name"] == "app"
    assert main["vcs.ref.head.name"] == "main" and main["vcs.ref.type"] == "branch"
    assert main["vcs.ref.head.revision"] == git(repo, "rev-parse", "HEAD")
    assert main["git.worktree.path"] == str(repo) and main["git.worktree.linked"] is False
    linked = facts.attributes(str(repo.parent / "app-x"))
    assert linked["vcs.ref.head.name"] == "feature/x" and linked["git.worktree.linked"] is True
    assert linked["vcs.repository.url.full"] == main["vcs.repository.url.full"]
    assert linked["git.worktree.path"] == str(repo.parent / "app-x")


def test_a_branch_switch_is_seen_after_the_recheck(repo: Path) -> None:
    now = [0.0]
    facts = GitAttributes(recheck_s=1.0, clock=lambda: now[0])
    assert facts.attributes(str(repo))["vcs.ref.head.name"] == "main"
    git(repo, "switch", "-q", "-c", "other")
    assert facts.attributes(str(repo))["vcs.ref.head.name"] == "main"  # within the recheck: cached
    now[0] = 2.0
    assert facts.attributes(str(repo))["vcs.ref.head.name"] == "other"


@pytest.mark.parametrize("dot_git", [
    b"gitdir: /nonexistent/place\n", b"\xff\xfe" * 10, b"gitdir: " + b"a" * 100_000, b"",
])
def test_a_hostile_git_file_gives_nothing(tmp_path: Path, dot_git: bytes) -> None:
    (tmp_path / ".git").write_bytes(dot_git)
    assert GitAttributes().attributes(str(tmp_path)) == {}


def test_a_hostile_head_gives_no_branch(tmp_path: Path) -> None:
    (tmp_path / ".git" / "refs").mkdir(parents=True)
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/../../../../etc/passwd\n")
    (tmp_path / ".git" / "config").write_bytes(b"[remote \"origin\"]\n\turl = https://user:secret@host/a/b.git\n")
    found = GitAttributes().attributes(str(tmp_path))
    assert "vcs.ref.head.revision" not in found
    assert "secret" not in json.dumps(found)


@pytest.mark.parametrize(("url", "expected"), [
    ("git@github.com:Acme/app.git", "https://github.com/Acme/app"),
    ("https://user:token@GitHub.com/Acme/app.git", "https://github.com/Acme/app"),
    ("ssh://git@gitlab.example.com:2222/group/sub/app.git", "https://gitlab.example.com/group/sub/app"),
])
def test_remote_urls_are_one_form_without_credentials(url: str, expected: str) -> None:
    assert normalise(url) == expected


def test_collect_once_stamps_the_entries(repo: Path, tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    (paths.home / ".acme").mkdir(parents=True)
    paths.agents_override_dir.mkdir(parents=True)
    (paths.agents_override_dir / "acme.json").write_text(json.dumps({
        "id": "acme", "name": "Acme", "parser": "canonical", "detect": {}, "integrations": [],
        "sources": [{"kind": "jsonl", "name": "log", "globs": ["~/.acme/*.jsonl"]}]}))
    records = [{"event.name": "user.prompt", "gen_ai.session.id": "s1", "event.id": "p1",
                "workspace.path": str(repo / "sub")},
               {"event.name": "user.prompt", "gen_ai.session.id": "s2", "event.id": "p2",
                "workspace.path": str(repo.parent / "app-x")}]
    (repo / "sub").mkdir()
    (paths.home / ".acme" / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    collect_cli(paths)
    by_session = {e["gen_ai.session.id"]: e for e in read_output(paths.output_dir) if e["event.name"] == "user.prompt"}
    assert by_session["s1"]["vcs.ref.head.name"] == "main" and by_session["s2"]["vcs.ref.head.name"] == "feature/x"
    assert by_session["s2"]["git.worktree.linked"] is True
    assert {e["vcs.repository.url.full"] for e in by_session.values()} == {"https://github.com/Acme/app"}
