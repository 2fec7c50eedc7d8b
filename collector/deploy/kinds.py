"""Integration kinds: the registry (kind -> schema -> build function) and the edits one spec needs.

A kind's build function gets the integration spec (defaults filled in, checked against the kind's
schema), the agent id, the paths and the hook script, and returns the :class:`FileEdit` list that
deploys it. Built-in kinds: ``settings_hooks`` (settings_hooks), ``flat_hooks`` (flat_hooks),
``toml_notify`` (toml_notify),
``dropin_plugin`` and ``plugin_inject`` (plugin_files), ``http_plugin_dir`` (http_plugin), ``hooks_dir``
(hooks_dir) and ``telemetry_settings`` (telemetry_settings, opt-in); an installed package adds
kinds under the entry point group ``agent_collector.integration_kinds``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from collector.definitions.schema import kind_schema
from collector.deploy.file_edit import FileEdit
from collector.deploy.flat_hooks import FlatHooksJson, FlatHooksToml
from collector.deploy.hooks_dir import hooks_dir_edits
from collector.deploy.http_plugin import http_plugin_edits
from collector.deploy.model import DeployError, NotImplementedKind
from collector.deploy.plugin_files import dropin_edits, plugin_inject_edits
from collector.deploy.settings_hooks import SettingsHooksJson, SettingsHooksToml
from collector.deploy.toml_notify import TomlNotify
from collector.paths import Paths
from collector.registry import Plugin, PluginConfigError, Registry, UnknownKind

EditsBuilder = Callable[[dict[str, Any], str, Paths, "Path | None"], list[FileEdit]]


def _settings_hooks(spec: dict[str, Any], agent: str, paths: Paths, hook_script: Path | None) -> list[FileEdit]:
    if spec["format"] == "toml":
        return [SettingsHooksToml(agent, spec, paths, hook_script)]
    return [SettingsHooksJson(agent, spec, paths, hook_script)]


def _flat_hooks(spec: dict[str, Any], agent: str, paths: Paths, hook_script: Path | None) -> list[FileEdit]:
    if spec["format"] == "toml":
        return [FlatHooksToml(agent, spec, paths, hook_script)]
    return [FlatHooksJson(agent, spec, paths, hook_script)]


def _toml_notify(spec: dict[str, Any], agent: str, paths: Paths, hook_script: Path | None) -> list[FileEdit]:
    return [TomlNotify(agent, spec, paths, hook_script)]


def _dropin(spec: dict[str, Any], agent: str, paths: Paths, hook_script: Path | None) -> list[FileEdit]:
    return dropin_edits(agent, spec, paths)


def _plugin_inject(spec: dict[str, Any], agent: str, paths: Paths, hook_script: Path | None) -> list[FileEdit]:
    return plugin_inject_edits(agent, spec, paths)


def _hooks_dir(spec: dict[str, Any], agent: str, paths: Paths, hook_script: Path | None) -> list[FileEdit]:
    return hooks_dir_edits(agent, spec, paths, hook_script)


def _http_plugin(spec: dict[str, Any], agent: str, paths: Paths, hook_script: Path | None) -> list[FileEdit]:
    return http_plugin_edits(agent, spec, paths, hook_script)


def _telemetry(spec: dict[str, Any], agent: str, paths: Paths, hook_script: Path | None) -> list[FileEdit]:
    from collector.deploy.telemetry_choice import saved_values
    from collector.deploy.telemetry_settings import TelemetryJson, TelemetryToml, endpoint

    if spec["format"] == "toml":
        return [TelemetryToml(spec, paths, endpoint(paths))]
    return [TelemetryJson(spec, paths, endpoint(paths), saved_values(paths, agent))]


@cache
def integration_kinds() -> Registry[EditsBuilder]:
    builtin: list[Plugin[EditsBuilder]] = [
        Plugin("settings_hooks", _settings_hooks, kind_schema("settings_hooks")),
        Plugin("flat_hooks", _flat_hooks, kind_schema("flat_hooks")),
        Plugin("toml_notify", _toml_notify, kind_schema("toml_notify")),
        Plugin("dropin_plugin", _dropin, kind_schema("dropin_plugin")),
        Plugin("plugin_inject", _plugin_inject, kind_schema("plugin_inject")),
        Plugin("http_plugin_dir", _http_plugin, kind_schema("http_plugin_dir")),
        Plugin("hooks_dir", _hooks_dir, kind_schema("hooks_dir")),
        Plugin("telemetry_settings", _telemetry, kind_schema("telemetry_settings")),
    ]
    return Registry("integration kind", builtin, group="agent_collector.integration_kinds")


def edits_for(agent: str, spec: dict[str, Any], paths: Paths, hook_script: Path | None) -> list[FileEdit]:
    """The file edits one integration spec needs. Raises DeployError (NotImplementedKind) when impossible."""
    try:
        edits: list[FileEdit] = integration_kinds().build(spec["kind"], spec, agent, paths, hook_script)
    except UnknownKind as exc:
        raise NotImplementedKind(str(exc)) from None
    except PluginConfigError as exc:
        raise DeployError(str(exc)) from None
    return edits
