"""Will Claude Code load our drop-in plugin's hooks? (The ``http_plugin_dir`` integration.)

The files can be in place and still do nothing: the user or an administrator may have turned the plugin
off (``enabledPlugins: {"agent-collector@skills-dir": false}``), turned every hook off
(``disableAllHooks``), allowed managed hooks only (``allowManagedHooksOnly``, managed settings), or
restricted http hooks to URLs ours does not match (``allowedHttpHookUrls``, ``*`` wildcards; the lists
of every settings file add up; an empty list blocks every http hook). Settings are read from the user's
``settings.json`` and the managed settings files of Linux and macOS; ``AGENT_COLLECTOR_SYSTEM_ROOT``
puts those system paths under another root (tests).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from collector.doctor.model import Finding, error, ok
from collector.doctor.system import read_json

PLUGIN_ID = "agent-collector@skills-dir"
MANAGED = ("etc/claude-code/managed-settings.json", "Library/Application Support/ClaudeCode/managed-settings.json")
MANAGED_DIRS = ("etc/claude-code/managed-settings.d", "Library/Application Support/ClaudeCode/managed-settings.d")
SWITCH = ('or use the command-hook variant, which needs no http hooks: put {"id": "claude-code", '
          '"integration_variant": "settings"} in <config dir>/agents.d/claude-code.json and run '
          '`agent-collector install --agent claude-code`')


def managed_files(env: Mapping[str, str] | None = None) -> list[Path]:
    root = Path((env if env is not None else os.environ).get("AGENT_COLLECTOR_SYSTEM_ROOT") or "/")
    files = [root / f for f in MANAGED]
    for folder in MANAGED_DIRS:
        files += sorted((root / folder).glob("*.json")) if (root / folder).is_dir() else []
    return [f for f in files if f.is_file()]


def _hook_urls(plugin_dir: Path) -> list[str]:
    hooks = read_json(plugin_dir / "hooks" / "hooks.json").get("hooks", {})
    urls = []
    for groups in hooks.values() if isinstance(hooks, dict) else []:
        for group in groups if isinstance(groups, list) else []:
            for hook in group.get("hooks", []) if isinstance(group, dict) else []:
                if isinstance(hook, dict) and hook.get("type") == "http" and isinstance(hook.get("url"), str):
                    urls.append(hook["url"])
    return sorted(set(urls))


def check_plugin_policy(agent: str, plugin_dir: Path, env: Mapping[str, str] | None = None) -> list[Finding]:
    name = f"agent {agent}: loaded"
    user_file = plugin_dir.parent.parent / "settings.json"
    sources = [(user_file, read_json(user_file))] + [(f, read_json(f)) for f in managed_files(env)]
    managed = sources[1:]
    problems = _disabled(sources, managed) + _http_blocked(sources, _hook_urls(plugin_dir))
    if problems:
        return [error(name, message, fix) for message, fix in problems]
    return [ok(name, f"Claude Code settings let the plugin {PLUGIN_ID} and its http hooks run")]


def _disabled(sources: list[tuple[Path, dict[str, Any]]], managed: list[tuple[Path, dict[str, Any]]]
              ) -> list[tuple[str, str]]:
    out = []
    for path, data in sources:
        plugins = data.get("enabledPlugins")
        if isinstance(plugins, dict) and plugins.get(PLUGIN_ID) is False:
            out.append((f"{path} turns the plugin off (enabledPlugins {PLUGIN_ID}: false)",
                        f"remove that entry (or set it to true) in {path}"))
        if data.get("disableAllHooks") is True:
            out.append((f"{path} sets disableAllHooks: Claude Code runs no hooks at all",
                        f"remove disableAllHooks from {path} (transcripts are still read, live status is lost)"))
    forced = any(isinstance(d.get("enabledPlugins"), dict) and d["enabledPlugins"].get(PLUGIN_ID) is True
                 for _, d in managed)
    for path, data in managed:
        if data.get("allowManagedHooksOnly") is True and not forced:
            out.append((f"{path} sets allowManagedHooksOnly: user and plugin hooks do not run",
                        f"ask the administrator to enable {PLUGIN_ID} in enabledPlugins of {path} (managed "
                        "plugins keep their hooks); no user setting can override it"))
    return out


def _http_blocked(sources: list[tuple[Path, dict[str, Any]]], urls: list[str]) -> list[tuple[str, str]]:
    lists = [(path, data["allowedHttpHookUrls"]) for path, data in sources
             if isinstance(data.get("allowedHttpHookUrls"), list)]
    if not lists or not urls:
        return []
    patterns = [str(p) for _, values in lists for p in values]
    blocked = [u for u in urls if not any(fnmatch.fnmatchcase(u, p) for p in patterns)]
    if not blocked:
        return []
    where = ", ".join(str(p) for p, _ in lists)
    return [(f"allowedHttpHookUrls in {where} does not allow {blocked[0]}: Claude Code blocks our http hooks",
             f'add "http://127.0.0.1:*" to allowedHttpHookUrls in {where}, ' + SWITCH)]
