"""An agent is one complete plug-in: the core names none, and an agent added the README's way (a
definition in the user's agents.d, an existing parser, a fixture) behaves exactly like the one it copies."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, ROOT, collect, long_after, prepare_fixture
from support.deploy import FIXTURES as DEPLOY_FIXTURES
from support.deploy import clear_env, make_home, paths_for

from collector.definitions import AgentDefinition, load_definitions
from collector.deploy import State, install_agent, integration_state, uninstall_agent
from collector.paths import Paths
from collector.pipeline.content_policy import KEY_FILE

CORE = [ROOT / "collector" / p for p in ("pipeline", "sources", "exporters", "deploy/engine.py", "service.py")]
AGENT_IDS = sorted(load_definitions().agents)
DUMMY = "dummy-agent"
# Fields that name the agent, or are derived from its name (ids are hashes that include it).
AGENT_KEYED = ("gen_ai.agent.type", "event.id", "observed_time_unix_nano")


def _core_files() -> list[Path]:
    return sorted(f for p in CORE for f in ([p] if p.is_file() else p.rglob("*.py")))


def test_the_core_names_no_agent() -> None:
    assert len(AGENT_IDS) >= 5 and len(_core_files()) > 20
    names = [n for a in AGENT_IDS for n in {a, a.replace("-", "_")}]
    # as whole words: a short id (pi) is part of many words (pipeline, typing)
    words = "|".join(re.escape(n) for n in names)
    pattern = re.compile(f"(?<![A-Za-z0-9])(?:{words})(?![A-Za-z0-9])", re.IGNORECASE)
    hits = [f"{f.relative_to(ROOT)}:{i}: {line.strip()}"
            for f in _core_files() for i, line in enumerate(f.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == [], "agent knowledge belongs in agents.d and the agent's parser:\n" + "\n".join(hits)


def _as_dummy(case: Path, tmp: Path) -> Paths:
    """The fixture case, but its hooks spooled by the dummy agent, which the user added in one file."""
    paths = prepare_fixture(case, tmp)
    spool = paths.spool_dir / case.parent.name
    if spool.exists():
        shutil.move(spool, paths.spool_dir / DUMMY)
    definition = json.loads((ROOT / "agents.d" / f"{case.parent.name}.json").read_text())
    definition["id"] = DUMMY
    paths.agents_override_dir.mkdir(parents=True)
    (paths.agents_override_dir / f"{DUMMY}.json").write_text(json.dumps(definition))
    (paths.config_dir / "config.toml").write_text(f'[agents.{case.parent.name}]\nenabled = false\n')
    return paths


def _comparable(entries: list[dict[str, Any]], agent: str) -> list[dict[str, Any]]:
    mine = [{k: v for k, v in e.items() if k not in AGENT_KEYED} for e in entries if e["gen_ai.agent.type"] == agent]
    return sorted(mine, key=lambda e: json.dumps(e, sort_keys=True))


# Command hooks in Claude's group layout (Qwen Code), Copilot's plain hook list, pi's extension dropped
# into a folder, Kilo Code's plugin, which is OpenCode's by configuration (no Python of its own), and
# Cline's hook executables, one per event in a folder (hooks_dir).
COPIED = ("qwen-code", "copilot", "pi", "kilo-code", "cline")
CASES = [case.parent for agent in COPIED for case in sorted((FIXTURES / agent).glob("*/expected.json"))]


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_an_agent_added_by_one_definition_file_behaves_like_the_one_it_copies(case: Path, tmp_path: Path) -> None:
    first = prepare_fixture(case, tmp_path / "original")
    original = collect(first, clock=long_after)
    second = _as_dummy(case, tmp_path / "dummy")
    second.state_dir.mkdir(parents=True)  # one install: the same content key, so the same digests
    shutil.copy2(first.state_dir / KEY_FILE, second.state_dir / KEY_FILE)
    dummy = collect(second, clock=long_after)
    assert {e["gen_ai.agent.type"] for e in dummy} == {DUMMY}
    statuses = [e for e in original if e["event.name"] == "session.status"]
    assert len(statuses) >= 3, "the fixture drives the session status through several states"
    assert len([e for e in dummy if e["event.name"] == "session.status"]) == len(statuses)
    assert _comparable(dummy, DUMMY) == _comparable(original, case.parent.name)


def _deployed(agent: str, home: Path, paths: Paths, definitions: dict[str, AgentDefinition]) -> dict[str, bytes]:
    """Install ``agent`` into ``home``, keep what changed there (our own data dir aside), uninstall."""
    before = _files(home, paths)
    changes = install_agent(definitions[agent], paths)
    assert changes and not [c for c in changes if c.failed], changes
    assert {s.state for s in integration_state(definitions[agent], paths)} == {State.IN_PLACE}
    after = _files(home, paths)
    uninstall_agent(definitions[agent], paths)
    assert _files(home, paths) == before, "uninstall gives the agent's config back byte for byte"
    return {name: data for name, data in after.items() if before.get(name) != data}


def _files(home: Path, paths: Paths) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*"))
            if p.is_file() and paths.data_dir not in p.parents}


@pytest.mark.parametrize("agent", COPIED[1:])
def test_a_copy_deploys_the_same_integration_files_under_its_own_id(
        agent: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clear_env(monkeypatch)
    home = make_home(tmp_path / "h", [agent]) if (DEPLOY_FIXTURES / agent).exists() else tmp_path / "h" / "home"
    home.mkdir(parents=True, exist_ok=True)
    paths = paths_for(home)
    definition = json.loads((ROOT / "agents.d" / f"{agent}.json").read_text())
    paths.agents_override_dir.mkdir(parents=True)
    (paths.agents_override_dir / f"{DUMMY}.json").write_text(json.dumps({**definition, "id": DUMMY}))
    loaded = load_definitions(paths.agents_override_dir)
    assert not loaded.problems, loaded.problems
    original = _deployed(agent, home, paths, loaded.agents)
    copy = _deployed(DUMMY, home, paths, loaded.agents)
    assert sorted(copy) == sorted(original) and original, "the same files, in the agent's own folders"
    own_id = re.compile(f"(?<![\\w.-]){re.escape(agent)}(?![\\w-])")
    for name, data in original.items():
        # the checkout's path may hold an agent id (a worktree named after one): it is the same in both
        theirs, ours = (d.decode().replace(str(ROOT), "<root>").splitlines() for d in (data, copy[name]))
        assert len(theirs) == len(ours), name
        changed = [(a, b) for a, b in zip(theirs, ours, strict=True) if a != b]
        assert changed, f"{name}: the integration names its agent"
        assert all(own_id.sub(DUMMY, a) == b for a, b in changed), f"{name}: only the agent id differs"


def test_a_status_rule_with_an_unknown_action_is_reported_and_the_definition_skipped(tmp_path: Path) -> None:
    definition = json.loads((ROOT / "agents.d" / "qwen-code.json").read_text())
    definition["id"] = DUMMY
    definition["status"]["events"]["Stop"] = "celebrate"
    (tmp_path / f"{DUMMY}.json").write_text(json.dumps(definition))
    loaded = load_definitions(tmp_path)
    assert DUMMY not in loaded.agents and "qwen-code" in loaded.agents
    assert any(p.json_path == "$.status.events.Stop" for p in loaded.problems), loaded.problems
