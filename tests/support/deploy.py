"""Shared helpers for the deploy, CLI, watchdog and service tests: a throwaway HOME holding the real
config files of every agent (tests/fixtures/deploy/<agent>/home), snapshots, definitions."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collector.definitions import AgentDefinition, load_definitions
from collector.paths import Paths, resolve_paths
from collector.state.checkpoints import CHECKPOINTS_FILE, CheckpointStore, KeyState, read_saved

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "deploy"
AGENTS = ["claude-code", "codex", "gemini-cli", "qwen-code", "opencode", "copilot"]
ENV_TO_CLEAR = [
    "CODEX_HOME", "CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "AGENT_COLLECTOR_HOME",
    "AGENT_COLLECTOR_DATA_DIR", "AGENT_COLLECTOR_CONFIG_DIR", "AGENT_COLLECTOR_ROOT",
    "AGENT_COLLECTOR_SPOOL_DIR",
]


def clear_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)


def make_home(root: Path, agents: list[str] | None = None, comments: bool = False) -> Path:
    """A HOME with the agents' real config files; ``comments`` adds JSONC comments where the agent
    allows them (Gemini CLI and Qwen Code read their settings.json as JSONC)."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    for agent in agents or AGENTS:
        shutil.copytree(FIXTURES / agent / "home", home, dirs_exist_ok=True)
    if comments:
        for rel in (".gemini/settings.json", ".qwen/settings.json"):
            path = home / rel
            if path.exists():
                text = path.read_text()
                commented = '  // my hooks, keep them\n  "hooks": { /* foreign ones first */'
                text = text.replace('  "hooks": {', commented, 1)
                path.write_text("// settings edited by hand\n" + text)
    return home


def paths_for(home: Path) -> Paths:
    return resolve_paths(home, env={})


def definitions(variant: dict[str, str] | None = None) -> dict[str, AgentDefinition]:
    """The built-in definitions. Claude Code's default integration is the drop-in plugin; these tests
    exercise its settings.json variant (the plugin has its own tests) unless told otherwise."""
    result = load_definitions()
    assert not result.problems, result.problems
    chosen = {"claude-code": "settings", **(variant or {})}
    agents = dict(result.agents)
    for agent_id, name in chosen.items():
        raw = {**agents[agent_id].raw, "integration_variant": name}
        agents[agent_id] = AgentDefinition(agent_id, raw, agents[agent_id].files)
    return agents


def choose_settings_variant(paths: Paths) -> None:
    """What a user does to keep Claude Code on settings.json hooks instead of the drop-in plugin."""
    paths.agents_override_dir.mkdir(parents=True, exist_ok=True)
    (paths.agents_override_dir / "claude-code.json").write_text(
        '{"id": "claude-code", "integration_variant": "settings"}\n')


def definition(raw: dict[str, Any]) -> AgentDefinition:
    return AgentDefinition(raw["id"], raw, ("<test>",))


def snapshot(root: Path, skip: Path | None = None) -> dict[str, str]:
    """Every file (sha256) and directory under ``root``, except the subtree ``skip``."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if skip is not None and (path == skip or skip in path.parents):
            continue
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "link->" + str(path.readlink())
        elif path.is_dir():
            out[rel] = "dir"
        else:
            try:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            except FileNotFoundError:  # a running daemon's temp file, renamed while we walked
                continue
    return out


def agent_snapshot(home: Path, paths: Paths) -> dict[str, str]:
    """What the agents see: HOME without our own data and config directories (and their parents)."""
    ours = [paths.data_dir, paths.config_dir]
    ancestors = {parent for o in ours for parent in o.parents}
    out = {}
    for rel, value in snapshot(home).items():
        path = home / rel
        if any(path == o or o in path.parents for o in ours) or (path in ancestors and value == "dir"):
            continue
        out[rel] = value
    return out


def hook_commands(settings: Any) -> list[str]:
    out = []
    for groups in (settings.get("hooks") or {}).values():
        for group in groups:
            for hook in group.get("hooks", []):
                out.append(hook.get("command"))
    return out


class StateSlots:
    """Daemon parts' keys in a checkpoint store under ``paths``' state dir, as the daemon hands them in
    (one store for the test, closed by ``close``)."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self._store: CheckpointStore | None = None

    def __call__(self, key: str) -> KeyState:
        if self._store is None:
            self._store = CheckpointStore(self.paths.state_dir / CHECKPOINTS_FILE)
        return KeyState(self._store, key)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def saved(paths: Paths, key: str) -> Any:
    """What a daemon part saved under ``key``, read as ``agent-collector status`` reads it (None: nothing)."""
    return read_saved(paths.state_dir / CHECKPOINTS_FILE, [key]).get(key)


@contextlib.contextmanager
def watchdog_thread(dog: Any) -> Iterator[None]:
    """A Watchdog's run() on its own event loop in a thread, as the daemon runs it; stopped on exit."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(dog.run(),), daemon=True)
    thread.start()
    from support.waits import wait_for

    wait_for(lambda: dog.rounds >= 1, 60, "the watchdog's watches to be up")  # its first round: watching
    yield
    loop.call_soon_threadsafe(dog.stop)
    thread.join(timeout=10)
    assert not thread.is_alive()
    loop.close()
