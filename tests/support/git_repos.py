"""Real git repositories for tests: ``git`` run with a fixed identity and no user or system config, and a
repository with an scp-style remote and one commit (``make_repo``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True,
                          check=True, timeout=60)
    return done.stdout.strip()


def make_repo(path: Path, remote: str = "git@github.com:acme/shop.git", branch: str = "main") -> Path:
    """``path`` as a git repository on ``branch`` with ``remote`` as origin and one commit."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    git(path, "remote", "add", "origin", remote)
    (path / "README.md").write_text("# test repo\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "init")
    return path
