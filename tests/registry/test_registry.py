"""The one registry shape: kind -> schema (with its defaults) -> build function; entry points add kinds."""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint
from typing import Any

import pytest

from collector.deploy import codex_trust
from collector.registry import Plugin, PluginConfigError, Registry, UnknownKind, with_defaults

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["path"],
    "properties": {
        "path": {"type": "string"},
        "name": {"type": "string", "default": "hooks"},
        "limits": {"type": "object", "properties": {"lines": {"type": "integer", "default": 10}}},
    },
}


def _echo(config: dict[str, Any], suffix: str) -> str:
    return f"{config['path']}:{config['name']}:{config['limits']['lines']}{suffix}"


def test_build_fills_the_schema_defaults_and_checks_the_spec() -> None:
    registry = Registry("thing", [Plugin("echo", _echo, SCHEMA)])
    assert registry.build("echo", {"path": "p", "limits": {}}, "!") == "p:hooks:10!"
    assert registry.build("echo", {"path": "p", "name": "n", "limits": {"lines": 3}}, "") == "p:n:3"
    with pytest.raises(PluginConfigError, match=r"thing 'echo': at \$: 'path' is a required property"):
        registry.configure("echo", {})
    with pytest.raises(UnknownKind, match=r"unknown thing 'nope' \(known: echo\)"):
        registry.get("nope")


def test_defaults_do_not_touch_the_spec_given() -> None:
    spec = {"path": "p", "limits": {}}
    assert with_defaults(SCHEMA, spec) == {"path": "p", "name": "hooks", "limits": {"lines": 10}}
    assert spec == {"path": "p", "limits": {}}


def test_entry_points_add_kinds_and_a_broken_one_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    points = [EntryPoint("codex_hooks_state", "collector.deploy.codex_trust:PLUGIN", "g"),
              EntryPoint("broken", "collector.no_such_module:PLUGIN", "g"),
              EntryPoint("wrong", "collector.deploy.codex_trust:HOW_TO_TRUST", "g")]
    with caplog.at_level(logging.ERROR, logger="collector.registry"):
        registry = Registry("trust store", [], group="g", discovered=lambda group: points if group == "g" else [])
    assert registry.kinds() == ["codex_hooks_state"]
    assert registry.get("codex_hooks_state") is codex_trust.PLUGIN
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "broken" in messages and "cannot be loaded" in messages and "not a collector.registry.Plugin" in messages


def test_an_installed_plugin_replaces_a_builtin_of_the_same_kind() -> None:
    replacement = Plugin("echo", lambda config, suffix: "replaced", {})
    points = [EntryPoint("echo", "x:y", "g")]
    registry = Registry("thing", [Plugin("echo", _echo, SCHEMA)], group="g",
                        discovered=lambda group: [_Loaded(p, replacement) for p in points])
    assert registry.build("echo", {}, "") == "replaced"


class _Loaded:
    """An entry point whose load() returns a given object (as EntryPoint.load would after an import)."""

    def __init__(self, point: EntryPoint, obj: Any) -> None:
        self.name, self.value, self._obj = point.name, point.value, obj

    def load(self) -> Any:
        return self._obj
