import sys
from pathlib import Path

import pytest

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
