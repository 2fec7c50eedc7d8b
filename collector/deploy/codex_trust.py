"""Is Codex going to run our hooks? Codex runs a non-managed hook only when the user trusted its exact
definition: ``[hooks.state."<hooks.json path>:<event_label>:<group>:<handler>"]`` in config.toml holds
``trusted_hash = "sha256:<hex>"`` (and ``enabled = false`` when the user disabled it in /hooks).

The hash is Codex's ``command_hook_hash``: SHA-256 of the key-sorted compact JSON of
``{"event_name", "matcher"?, "hooks": [{"type", "command", "timeout", "async", "statusMessage"?}]}``.
Keys and hashes are checked against the real Codex CLI 0.169 (its app-server's ``hooks/list``, in
tests/e2e/test_deploy_codex_trust.py). A matching hash means "trusted"; a different one means Codex will
see the hook as modified and skip it; none means untrusted.
The keys are positional, so moving our group within an event's list asks for trust again.
We never write trust ourselves: trusting is the user's decision.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collector.deploy.hookcmd import is_our_hook
from collector.deploy.model import TrustResult
from collector.paths import Paths
from collector.registry import Plugin

HOW_TO_TRUST = (
    "start `codex` in a terminal, type /hooks, review the agent-collector hooks and trust them "
    "(`codex exec` cannot grant trust; without it Codex skips our hooks silently; "
    "notify and the rollout files still work)"
)


def event_label(event: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def _normalized_handler(handler: dict[str, Any], label: str) -> dict[str, Any]:
    raw = handler.get("timeout")
    session_end = label == "session_end"
    timeout: float = 1 if session_end else 600
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        timeout = raw
    timeout = min(3, max(1, timeout)) if session_end else max(1, timeout)
    out: dict[str, Any] = {
        "type": "command",
        "command": handler.get("command"),
        "timeout": int(timeout) if float(timeout).is_integer() else timeout,
        "async": bool(handler.get("async", False)),
    }
    if handler.get("statusMessage"):
        out["statusMessage"] = handler["statusMessage"]
    return out


def handler_hash(event: str, matcher: str | None, handler: dict[str, Any]) -> str:
    label = event_label(event)
    identity: dict[str, Any] = {"event_name": label, "hooks": [_normalized_handler(handler, label)]}
    if matcher is not None:
        identity["matcher"] = matcher
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(slots=True)
class TrustReport:
    total: int = 0
    trusted: int = 0
    untrusted: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.total > 0 and self.trusted == self.total

    def hint(self, config: Path) -> str:
        if self.error:
            return f"cannot tell whether Codex trusts our hooks ({self.error}); to be sure, {HOW_TO_TRUST}"
        if self.ok:
            return f"Codex trusts all {self.total} of our hooks"
        parts = []
        if self.untrusted:
            parts.append(f"{len(self.untrusted)} of {self.total} not trusted yet")
        if self.modified:
            parts.append(f"{len(self.modified)} changed since trusted (or Codex hashes differently)")
        if self.disabled:
            parts.append(f"{len(self.disabled)} disabled in /hooks")
        return (f"Codex will skip our hooks: {', '.join(parts)}; {HOW_TO_TRUST}. "
                f"Trust lives in {config} [hooks.state]")


def codex_trust(hooks_file: Path, hooks_json: Any, config_file: Path) -> TrustReport:
    report = TrustReport()
    try:
        config = tomllib.loads(config_file.read_text("utf-8")) if config_file.exists() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        report.error = f"{config_file}: {exc}"
        return report
    hooks_cfg = config.get("hooks")
    state = hooks_cfg.get("state", {}) if isinstance(hooks_cfg, dict) else {}
    events = hooks_json.get("hooks") if isinstance(hooks_json, dict) else None
    for event, groups in (events or {}).items():
        for gi, group in enumerate(groups if isinstance(groups, list) else []):
            if not isinstance(group, dict):
                continue
            for hi, handler in enumerate(group.get("hooks") or []):
                if not is_our_hook(handler):
                    continue
                report.total += 1
                key = f"{hooks_file}:{event_label(event)}:{gi}:{hi}"
                entry = state.get(key) if isinstance(state, dict) else None
                if not isinstance(entry, dict) or "trusted_hash" not in entry:
                    report.untrusted.append(key)
                elif entry.get("enabled") is False:
                    report.disabled.append(key)
                elif entry["trusted_hash"] != handler_hash(event, group.get("matcher"), handler):
                    report.modified.append(key)
                else:
                    report.trusted += 1
    return report


def check_hooks_file(hooks_file: Path, config_file: Path) -> TrustResult:
    """The trust store's answer for our hooks in ``hooks_file``."""
    try:
        hooks_json = json.loads(hooks_file.read_bytes())
    except (OSError, ValueError) as exc:
        return TrustResult(False, f"{hooks_file}: {exc}", error=True)
    report = codex_trust(hooks_file, hooks_json, config_file)
    return TrustResult(report.ok, report.hint(config_file))


def _build(config: dict[str, Any], paths: Paths) -> Callable[[Path], TrustResult]:
    config_file = paths.expand(config["config"])
    return lambda hooks_file: check_hooks_file(hooks_file, config_file)


PLUGIN: Plugin[Callable[[dict[str, Any], Paths], Callable[[Path], TrustResult]]] = Plugin(
    "codex_hooks_state",
    _build,
    {
        "type": "object",
        "properties": {
            "config": {"type": "string", "default": "${CODEX_HOME:-~/.codex}/config.toml",
                       "description": "The config.toml holding [hooks.state]."},
        },
    },
)
