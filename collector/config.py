"""Configuration: ``config.toml`` in the user config directory, then environment overrides.

Every setting has a default, so no file is needed. Environment variables override the file:
``AGENT_COLLECTOR_<SECTION>__<KEY>=value`` (e.g. ``AGENT_COLLECTOR_CONTENT__CAPTURE=true``,
``AGENT_COLLECTOR_INGEST__PORT=4399``); values are parsed as TOML scalars when they can be.
The standard ``OTEL_EXPORTER_OTLP_*`` variables are read by the OTLP exporters themselves.
"""

from __future__ import annotations

import copy
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DEFAULTS: dict[str, Any] = {
    "collector": {
        "user_id": "",  # default: the login name
        "host_name": "",  # default: the machine's host name
        "poll_interval_s": 2.0,  # file events wake us sooner; this is the safety net
        "batch_size": 2000,
        "max_line_bytes": 16 * 1024 * 1024,
        "seen_retention_days": 30,
    },
    "content": {"capture": False},
    "masking": {"enabled": True},
    "agents": {},  # agents.<id>.enabled / content_capture / idle_timeout_s
    "jsonl": {"enabled": True, "dir": ""},
    "otlp": {"enabled": False, "backends": []},
    "ingest": {"enabled": True, "port": 4319, "max_body_bytes": 4 * 1024 * 1024},
    "watchdog": {"enabled": True},
}

ENV_PREFIX = "AGENT_COLLECTOR_"


class ConfigError(Exception):
    pass


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def _scalar(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = _scalar(value)
    return out


def load_config(path: Path, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    config = copy.deepcopy(DEFAULTS)
    if path.exists():
        try:
            _merge(config, tomllib.loads(path.read_text(encoding="utf-8")))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: {exc}") from exc
    _merge(config, _env_overrides(os.environ if env is None else env))
    return config


def agent_setting(config: dict[str, Any], agent: str, key: str, default: Any) -> Any:
    """``agents.<id>.<key>``; environment overrides spell the id with underscores
    (``AGENT_COLLECTOR_AGENTS__CLAUDE_CODE__CONTENT_CAPTURE``), so both spellings are read."""
    agents = config.get("agents", {})
    for name in (agent, agent.replace("-", "_")):
        section = agents.get(name, {})
        if isinstance(section, dict) and key in section:
            return section[key]
    return default


DEFAULT_FILE = """\
# agent-collector configuration. Every key is optional; these are the defaults.
# Environment overrides: AGENT_COLLECTOR_<SECTION>__<KEY>=value, e.g. AGENT_COLLECTOR_CONTENT__CAPTURE=true

[collector]
# user_id = "alice"          # default: login name
poll_interval_s = 2.0

[content]
# Keep prompts, completions, tool arguments and results? Off: only their length and SHA-256 are kept.
capture = false

[masking]
enabled = true               # secrets are masked in everything that is kept

[jsonl]
enabled = true               # daily files under <data dir>/output

[ingest]
enabled = true               # loopback HTTP hook ingest
port = 4319

# [agents.claude-code]
# content_capture = true     # per-agent override

# [otlp]
# enabled = true
# [[otlp.backends]]
# endpoint = "http://127.0.0.1:4318"
"""
