"""Fixtures for the end-to-end tests that drive the real agent CLIs (see README.md here)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

E2E_DIR = Path(__file__).resolve().parent
if str(E2E_DIR) not in sys.path:  # the harness modules import each other as top-level modules
    sys.path.insert(0, str(E2E_DIR))

from fake_llm import FakeLLMServer  # noqa: E402
from harness import AgentHome, init_workdir  # noqa: E402
from npm_agents import ensure_agents  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "e2e: drives a real agent CLI installed from npm against the fake model server"
    )


@pytest.fixture(scope="session")
def e2e_agents_bin() -> Path:
    """Install (once, cached across runs) the pinned agent CLIs; returns node_modules/.bin."""
    return ensure_agents()


@pytest.fixture
def fake_llm(tmp_path: Path) -> Iterator[FakeLLMServer]:
    """A fresh fake model server; its requests/usage also go to ``<tmp>/fake_llm_requests.jsonl``."""
    with FakeLLMServer(log_path=tmp_path / "fake_llm_requests.jsonl") as server:
        yield server


@pytest.fixture
def agent_home(tmp_path: Path) -> AgentHome:
    """Empty HOME plus a git-initialised workdir with a README, like the samples' (Claude needs git)."""
    home = tmp_path / "home"
    home.mkdir()
    workdir = init_workdir(tmp_path / "work", git=True)
    return AgentHome(root=tmp_path, home=home, workdir=workdir)
