"""Every command hook `install` writes, for every agent and variant, carries an explicit timeout: an agent's
default can be a minute (Qwen Code 0.24: 60 s) and a hook must never hold the agent that long."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.deploy import choose_settings_variant, clear_env, definitions, make_home, paths_for

from collector.deploy import install_agent
from collector.deploy.records import RecordStore


def command_hooks(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("type") == "command" or ("command" in node and isinstance(node.get("command"), str)):
            yield node
        for value in node.values():
            yield from command_hooks(value)
    elif isinstance(node, list):
        for value in node:
            yield from command_hooks(value)


@pytest.mark.parametrize("variant", ["default", "settings"])
def test_every_command_hook_we_write_has_a_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variant: str
) -> None:
    clear_env(monkeypatch)
    home = make_home(tmp_path)
    paths = paths_for(home)
    if variant == "settings":
        choose_settings_variant(paths)
    defs = definitions({"claude-code": "settings"} if variant == "settings" else None)
    for defn in defs.values():
        install_agent(defn, paths)
    files = sorted({Path(r.file) for r in RecordStore(paths).all() if r.file.endswith(".json")})
    assert len(files) >= 4, files
    ours = []
    for file in files:
        text = file.read_text()
        data = json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")))
        ours += [h for h in command_hooks(data) if "agent-collector" in h.get("command", "")]
    agents = {h["command"].split()[2] for h in ours if "agent-collector-hook.sh" in h["command"]}
    assert {"codex", "gemini-cli", "qwen-code"} <= agents
    missing = [h["command"] for h in ours if not isinstance(h.get("timeout"), (int, float)) or h["timeout"] <= 0]
    assert not missing, missing
