"""One discovered plugin and the only way we call it: read-only subcommands, gated by the capabilities
its ``info`` declared, each run bounded (:mod:`collector.sources.process`) with the protocol's
environment (``ENTIRE_REPO_ROOT``, ``ENTIRE_PROTOCOL_VERSION=1``) and the repository as working directory.

Never called, whatever a plugin declares: ``install-hooks``, ``uninstall-hooks``, ``write-session``,
``prepare-transcript``, ``generate-text``, ``write-hook-response`` (they write files, install hooks that
run Entire, or spend model tokens)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from collector.sources.process import Limits, ProcessResult, run_bounded

PROTOCOL_VERSION = 1
# subcommand -> the capability it needs (None: every plugin has it)
READ_ONLY: dict[str, str | None] = {
    "info": None,
    "detect": None,
    "get-session-dir": None,
    "resolve-session-file": None,
    "read-transcript": None,
    "get-transcript-position": "transcript_analyzer",
    "extract-prompts": "transcript_analyzer",
    "extract-modified-files": "transcript_analyzer",
    "calculate-tokens": "token_calculator",
    "parse-hook": "hooks",
}


class PluginError(Exception):
    """A call failed: the plugin's exit, timeout, output cap, or an answer that is not the protocol's."""


class NotAllowed(PluginError):
    """A subcommand we never run, or one the plugin's capabilities do not include."""


@dataclass(frozen=True, slots=True)
class ExternalPlugin:
    name: str
    path: str
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def capabilities(self) -> dict[str, Any]:
        caps = self.info.get("capabilities")
        return caps if isinstance(caps, dict) else {}

    def allows(self, subcommand: str) -> bool:
        if subcommand not in READ_ONLY:
            return False
        needed = READ_ONLY[subcommand]
        return needed is None or self.capabilities.get(needed) is True


@dataclass(slots=True)
class Caller:
    """Runs a plugin's subcommands; counts runs for ``status``."""

    limits: Limits
    runs: int = 0
    last: ProcessResult | None = None

    def raw(self, plugin: ExternalPlugin, subcommand: str, args: Sequence[str], repo: str,
            stdin: bytes | None = None) -> bytes:
        if not plugin.allows(subcommand):
            raise NotAllowed(f"{subcommand} is not a read-only subcommand {plugin.name} declares")
        env = {**os.environ, "ENTIRE_REPO_ROOT": repo, "ENTIRE_PROTOCOL_VERSION": str(PROTOCOL_VERSION)}
        result = run_bounded([plugin.path, subcommand, *args], self.limits, env=env, cwd=repo, stdin=stdin)
        self.runs += 1
        self.last = result
        if not result.ok:
            raise PluginError(f"{subcommand}: {result.reason()}")
        return result.stdout

    def json(self, plugin: ExternalPlugin, subcommand: str, args: Sequence[str], repo: str,
             stdin: bytes | None = None) -> Any:
        out = self.raw(plugin, subcommand, args, repo, stdin)
        try:
            return orjson.loads(out)
        except orjson.JSONDecodeError:
            raise PluginError(f"{subcommand}: the answer is not JSON ({len(out)} bytes)") from None

    def obj(self, plugin: ExternalPlugin, subcommand: str, args: Sequence[str], repo: str,
            stdin: bytes | None = None) -> dict[str, Any]:
        value = self.json(plugin, subcommand, args, repo, stdin)
        if not isinstance(value, dict):
            raise PluginError(f"{subcommand}: the answer is not a JSON object")
        return value
