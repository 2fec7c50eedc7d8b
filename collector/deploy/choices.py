"""The user's explicit per-agent choice (``agents disable ID`` / ``agents enable ID``), kept in
``<state_dir>/agent-choices.json``. A disabled agent is not installed by default and the watchdog
never repairs it; the choice survives upgrades because it lives in the state dir."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from collector.deploy.fsutil import read_or_none, write_atomic
from collector.paths import Paths
from collector.util.private import private_dir


def choices_file(paths: Paths) -> Path:
    return paths.state_dir / "agent-choices.json"


def _load(paths: Paths) -> dict[str, Any]:
    raw = read_or_none(choices_file(paths))
    if raw is None:
        return {"disabled": {}}
    try:
        data = json.loads(raw)
    except ValueError:
        return {"disabled": {}}
    if not isinstance(data, dict) or not isinstance(data.get("disabled"), dict):
        return {"disabled": {}}
    return data


def disabled_agents(paths: Paths) -> set[str]:
    return set(_load(paths)["disabled"])


def is_disabled(paths: Paths, agent: str) -> bool:
    return agent in disabled_agents(paths)


def set_disabled(paths: Paths, agent: str, disabled: bool) -> bool:
    """Record the choice; returns whether it changed."""
    data = _load(paths)
    if disabled == (agent in data["disabled"]):
        return False
    if disabled:
        data["disabled"][agent] = {"since_unix": time.time()}
    else:
        del data["disabled"][agent]
    private_dir(choices_file(paths).parent)
    write_atomic(choices_file(paths), json.dumps(data, indent=2, sort_keys=True).encode() + b"\n", mode=0o600)
    return True
