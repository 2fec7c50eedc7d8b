"""The command line an agent runs for one hook event, and how we recognise our own entries."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any

from collector.paths import Paths, project_root

HOOK_SCRIPT_NAME = "agent-collector-hook.sh"
MARKER = HOOK_SCRIPT_NAME  # every command we write runs this script; nobody else's does
ASSET_MARKER = "agent-collector:managed"  # in files we drop into an agent's plugin folder


def default_hook_script() -> Path:
    return project_root() / "hooks" / HOOK_SCRIPT_NAME


def hook_shell() -> str:
    """``bash`` where there is one: the script runs there without starting any program (its clock is
    $EPOCHREALTIME); started by ``sh`` it would re-execute itself with bash, one more process start."""
    return "bash" if shutil.which("bash") else "sh"


def hook_argv(paths: Paths, agent: str, event: str, hook_script: Path | None = None) -> list[str]:
    script = Path(hook_script or default_hook_script())
    if script.name != HOOK_SCRIPT_NAME:
        raise ValueError(f"the hook script must be named {HOOK_SCRIPT_NAME}, not {script.name}")
    return [hook_shell(), str(script.absolute()), agent, event, str(paths.spool_dir.absolute())]


def hook_command(paths: Paths, agent: str, event: str, hook_script: Path | None = None) -> str:
    """``bash '<script>' <agent> <event> '<spool>'`` (``sh`` without bash), quoted for a POSIX shell."""
    return " ".join(shlex.quote(part) for part in hook_argv(paths, agent, event, hook_script))


def is_our_command(value: Any) -> bool:
    if isinstance(value, str):
        return MARKER in value
    if isinstance(value, list):
        return any(isinstance(v, str) and MARKER in v for v in value)
    return False


def is_our_hook(hook: Any) -> bool:
    return isinstance(hook, dict) and is_our_command(hook.get("command"))
