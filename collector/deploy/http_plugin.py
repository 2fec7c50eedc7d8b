"""The ``http_plugin_dir`` integration: Claude Code as a drop-in plugin whose hooks append to the spool.

One directory, ``~/.claude/skills/agent-collector/`` (a *skills-directory plugin*: Claude Code loads any
``<skills dir>/<name>/.claude-plugin/plugin.json`` as ``<name>@skills-dir`` on the next session, no
install step), holding exactly two files:

* ``.claude-plugin/plugin.json``: the manifest, with ``metadata.managedBy`` = ``agent-collector``. We
  replace or delete the directory's files only when that marker is there.
* ``hooks/hooks.json``: ``type: "command"`` hooks running the spool hook script for every event, each
  with an explicit timeout.

The kind keeps its name from the time its hooks posted over HTTP (``type: "http"`` with the ingest token
in this file). They no longer do: a hook that posts trusts whoever listens on the port, and another local
user can bind it while the daemon restarts (the token and the prompt would go to them). The spool is a
0700 directory of this user: nothing leaves it, the daemon reads it whether it was up or not, and the
file holds no secret. The daemon's file events on the spool keep the live view as prompt as the posts were.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from collector import __version__
from collector.deploy.file_edit import Check, FileEdit
from collector.deploy.fsutil import write_atomic
from collector.deploy.hookcmd import hook_command
from collector.deploy.model import DeployError
from collector.ingest.secret import ensure_token
from collector.paths import Paths

PLUGIN_NAME = "agent-collector"
MANAGED_BY = "agent-collector"
HOOKS_MARKER = "agent-collector:managed"
DEFAULT_PORT = 4319
DEFAULT_TIMEOUT_S = 3
# Events whose hook groups take a tool-name matcher.
MATCHER_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest", "PermissionDenied")
# Every event Claude Code 2.1.328 accepts a hook for, except WorktreeCreate/WorktreeRemove (their hooks
# replace Claude's own worktree handling), MessageDisplay (every streamed text chunk: content only, one
# request each) and FileChanged (needs file-name matchers): the collector reads none of those.
DEFAULT_EVENTS = (
    "SessionStart", "Setup", "InstructionsLoaded", "UserPromptSubmit", "UserPromptExpansion",
    "PreToolUse", "PermissionRequest", "PermissionDenied", "PostToolUse", "PostToolUseFailure",
    "PostToolBatch", "Notification", "Elicitation", "ElicitationResult", "SubagentStart", "SubagentStop",
    "TaskCreated", "TaskCompleted", "TeammateIdle", "Stop", "StopFailure", "PreCompact", "PostCompact",
    "ConfigChange", "CwdChanged", "SessionEnd",
)


def ingest_url(port: int, agent: str) -> str:
    return f"http://127.0.0.1:{port}/v1/hooks/{agent}"


def manifest(port: int) -> dict[str, Any]:
    return {
        "name": PLUGIN_NAME,
        "version": __version__,
        "description": "agent-collector: sends Claude Code's hook events to the local agent-collector daemon "
                       "(telemetry: sessions, prompts, tool calls, status). Managed by agent-collector; "
                       "`agent-collector uninstall --agent claude-code` removes it.",
        "author": {"name": "agent-collector"},
        "license": "Apache-2.0",
        "metadata": {"managedBy": MANAGED_BY, "version": __version__,
                     "endpoint": f"http://127.0.0.1:{port}"},
    }


def hooks_document(agent: str, spec: dict[str, Any], paths: Paths,
                   hook_script: Path | None = None) -> dict[str, Any]:
    """Every event's hook runs the spool hook script: no network, no secret in the file."""
    events = spec.get("events") or list(DEFAULT_EVENTS)
    timeout = spec.get("timeout", DEFAULT_TIMEOUT_S)
    hooks: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        hook = {"type": "command", "command": hook_command(paths, agent, event, hook_script), "timeout": timeout}
        group: dict[str, Any] = {"matcher": "*"} if event in MATCHER_EVENTS else {}
        group["hooks"] = [hook]
        hooks[event] = [group]
    return {"description": f"{HOOKS_MARKER}: telemetry hooks written by agent-collector", "hooks": hooks}


def _json(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def is_managed_manifest(data: bytes | None) -> bool:
    if data is None:
        return False
    try:
        parsed = json.loads(data)
    except ValueError:
        return False
    metadata = parsed.get("metadata") if isinstance(parsed, dict) else None
    return isinstance(metadata, dict) and metadata.get("managedBy") == MANAGED_BY


def is_managed_hooks(data: bytes | None) -> bool:
    return data is not None and HOOKS_MARKER.encode() in data


class PluginFile:
    """One whole file of the plugin directory, ours only when it carries our marker. Written 0600 (they
    hold no secret: the hooks spool; earlier versions put the ingest token in hooks.json)."""

    private = True

    def __init__(self, spec: dict[str, Any], path: Path, content: bytes, what: str,
                 ours: Any) -> None:
        self.spec = spec
        self.path = path
        self.content = content
        self.what = what
        self._ours = ours

    def apply(self, current: bytes | None) -> bytes | None:
        if current is not None and not self._ours(current):
            raise DeployError(f"{self.path} exists without the agent-collector marker; not replaced "
                              f"(remove it yourself or choose settings.json hooks)")
        return self.content

    def strip(self, current: bytes | None) -> bytes | None:
        return None if current is not None and self._ours(current) else current

    def check(self, current: bytes | None) -> Check:
        if current is None:
            return Check("missing", f"{self.path} does not exist")
        if current == self.content:
            return Check("ok", f"{self.what} in place")
        if self._ours(current):
            return Check("outdated", f"{self.what} is from another agent-collector version or was edited")
        return Check("conflict", f"{self.path} is someone else's file")


def plugin_dir(spec: dict[str, Any], paths: Paths) -> Path:
    return paths.expand(spec["dir"])


def configured_port(paths: Paths) -> int:
    """The ingest port the daemon will listen on: ingest.port (config file, AGENT_COLLECTOR_INGEST__PORT),
    else the port chosen for this user (<state dir>/ingest.port, chosen and kept now if there is none)."""
    from collector.config import ConfigError, load_config
    from collector.ingest.secret import ingest_port

    try:
        configured = load_config(paths.config_file).ingest.port
    except ConfigError:
        configured = 0
    return ingest_port(paths, configured)


def http_plugin_edits(agent: str, spec: dict[str, Any], paths: Paths, hook_script: Path | None = None,
                      port: int | None = None) -> list[FileEdit]:
    """The manifest, then hooks/hooks.json. ``port`` defaults to the configured ingest port."""
    port = configured_port(paths) if port is None else port
    root = plugin_dir(spec, paths)
    manifest_path = root / ".claude-plugin" / "plugin.json"
    if manifest_path.exists() and not is_managed_manifest(manifest_path.read_bytes()):
        raise DeployError(f"{root} holds a plugin that agent-collector did not write "
                          f"(no metadata.managedBy = {MANAGED_BY!r}); left untouched")
    hooks = hooks_document(agent, spec, paths, hook_script)
    return [
        PluginFile(spec, manifest_path, _json(manifest(port)), "plugin manifest", is_managed_manifest),
        PluginFile(spec, root / "hooks" / "hooks.json", _json(hooks), "plugin hooks", is_managed_hooks),
    ]


def write_plugin(agent: str, spec: dict[str, Any], paths: Paths, hook_script: Path | None = None,
                 port: int | None = None) -> Path:
    """Install the plugin directory directly (tests, the e2e harness); the engine does it with records."""
    ensure_token(paths)
    edits = http_plugin_edits(agent, spec, paths, hook_script, port)
    for edit in edits:
        current = edit.path.read_bytes() if edit.path.exists() else None
        content = edit.apply(current)
        assert content is not None
        write_atomic(edit.path, content, private=True)
    return plugin_dir(spec, paths)


def remove_plugin(spec: dict[str, Any], paths: Paths) -> bool:
    """Delete the plugin directory if, and only if, its manifest carries our marker."""
    root = plugin_dir(spec, paths)
    manifest_path = root / ".claude-plugin" / "plugin.json"
    if not manifest_path.exists() or not is_managed_manifest(manifest_path.read_bytes()):
        return False
    hooks = root / "hooks" / "hooks.json"
    if hooks.exists() and is_managed_hooks(hooks.read_bytes()):
        hooks.unlink()
    manifest_path.unlink()
    for directory in (root / "hooks", root / ".claude-plugin", root):
        with contextlib.suppress(OSError):
            directory.rmdir()  # only when empty: anything the user added stays
    return True
