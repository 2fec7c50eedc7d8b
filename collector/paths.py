"""Where things live: the user's home, our config, data, spool, output and state directories.

Every path can be moved: ``--home`` (or ``AGENT_COLLECTOR_HOME``) replaces the home directory the agents
live in (tests, backfills of another account's data), ``AGENT_COLLECTOR_DATA_DIR`` and
``AGENT_COLLECTOR_CONFIG_DIR`` move our own directories. Defaults follow XDG on Linux and the
Application Support / Preferences folders on macOS (via platformdirs).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import platformdirs

APP = "agent-collector"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True, slots=True)
class Paths:
    home: Path
    config_dir: Path
    data_dir: Path
    # True when the home was named (--home / AGENT_COLLECTOR_HOME): agent path templates then resolve under
    # that home alone, so the caller's own XDG_* / CODEX_HOME / ... variables cannot point elsewhere.
    isolated: bool = False

    @property
    def spool_dir(self) -> Path:
        return self.data_dir / "spool"

    @property
    def output_dir(self) -> Path:
        return self.data_dir / "output"

    @property
    def state_dir(self) -> Path:
        return self.data_dir / "state"

    @property
    def queue_dir(self) -> Path:
        return self.data_dir / "queue"

    @property
    def ingest_token_file(self) -> Path:
        """The ingest's per-user secret (collector.ingest.secret)."""
        return self.state_dir / "ingest.token"

    @property
    def ingest_header_file(self) -> Path:
        return self.state_dir / "ingest.header"

    @property
    def ingest_port_file(self) -> Path:
        return self.state_dir / "ingest.port"

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config.toml"

    @property
    def agents_override_dir(self) -> Path:
        return self.config_dir / "agents.d"

    def spool_file(self, agent: str, day: str) -> Path:
        return self.spool_dir / agent / f"{agent}-{day}.jsonl"

    def expand(self, template: str, env: Mapping[str, str] | None = None) -> Path:
        """Expand ``${VAR:-default}`` and a leading ``~`` (against this home, not the process's).

        With an isolated home the process's variables are not consulted: every ``${VAR:-default}`` takes
        its default, which lives under the home."""
        if env is None:
            env = {} if self.isolated else os.environ
        return Path(expand_template(template, self.home, env))


def expand_template(template: str, home: Path, env: Mapping[str, str]) -> str:
    def repl(match: re.Match[str]) -> str:
        value = env.get(match.group(1))
        if value:
            return value
        return match.group(2) or ""

    previous = None
    text = template
    while previous != text:  # defaults may themselves hold a variable
        previous, text = text, _VAR.sub(repl, text)
    if text == "~" or text.startswith("~/"):
        text = str(home) + text[1:]
    return text


def resolve_paths(home: str | Path | None = None, env: Mapping[str, str] | None = None) -> Paths:
    """The paths for ``home`` (default: $AGENT_COLLECTOR_HOME, then the real home)."""
    env = os.environ if env is None else env
    explicit = home is not None or bool(env.get("AGENT_COLLECTOR_HOME"))
    home_path = Path(home or env.get("AGENT_COLLECTOR_HOME") or env.get("HOME") or Path.home()).expanduser()
    config_dir = env.get("AGENT_COLLECTOR_CONFIG_DIR")
    data_dir = env.get("AGENT_COLLECTOR_DATA_DIR")
    if explicit:
        default_config, default_data = _under_home(home_path)
    else:
        default_config = Path(platformdirs.user_config_dir(APP))
        default_data = Path(platformdirs.user_data_dir(APP))
    return Paths(
        home=home_path,
        config_dir=Path(config_dir) if config_dir else default_config,
        data_dir=Path(data_dir) if data_dir else default_data,
        isolated=explicit,
    )


def _under_home(home: Path) -> tuple[Path, Path]:
    if sys.platform == "darwin":
        base = home / "Library" / "Application Support" / APP
        return base, base
    return home / ".config" / APP, home / ".local" / "share" / APP


def project_root() -> Path:
    """The root holding agents.d/, schemas/, hooks/, integrations/: $AGENT_COLLECTOR_ROOT, the checkout,
    or ``<venv>/share/agent-collector`` where deploy/install.sh copies them."""
    here = Path(__file__).resolve().parent
    explicit = os.environ.get("AGENT_COLLECTOR_ROOT")
    candidates = [Path(explicit)] if explicit else []
    candidates += [here.parent, here / "data", Path(sys.prefix) / "share" / APP]
    for candidate in candidates:
        if (candidate / "agents.d").is_dir() and (candidate / "schemas").is_dir():
            return candidate
    raise FileNotFoundError(f"cannot find agents.d/ and schemas/ next to {here}")


@cache
def bundled_schema(name: str) -> dict[str, Any]:
    """``schemas/<name>.schema.json`` (``config``, ``agent-definition``, ``activity-event``), read once;
    callers must not change it."""
    data: dict[str, Any] = orjson.loads((project_root() / "schemas" / f"{name}.schema.json").read_bytes())
    return data
