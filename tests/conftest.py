from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from support.deploy import StateSlots

    from collector.paths import Paths

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Variables that move an agent's files; a developer's own settings must not leak into the tests.
_AGENT_ENV = ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME",
              "XDG_STATE_HOME", "XDG_CACHE_HOME", "AGENT_COLLECTOR_HOME", "AGENT_COLLECTOR_DATA_DIR",
              "AGENT_COLLECTOR_CONFIG_DIR", "OTEL_EXPORTER_OTLP_ENDPOINT")


@pytest.fixture(autouse=True)
def _isolated_agent_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No developer setting leaks in, and nothing a test does lands in the real home (npm cache included)."""
    for name in _AGENT_ENV:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("npm_config_cache", str(home / ".npm"))


@pytest.fixture
def slots(env: tuple[Path, Paths]) -> Iterator[StateSlots]:
    """The daemon parts' checkpoint slots under the paths of the requesting module's own ``env`` fixture
    (a deploy test's home), closed after the test."""
    from support.deploy import StateSlots

    made = StateSlots(env[1])
    yield made
    made.close()
