"""One shape for every kind of plug-in: parsers, source kinds, integration kinds, trust stores, exporters.

A :class:`Plugin` is a kind name, the JSON Schema of its configuration (with the defaults, as the
schema's ``default`` keywords: the one place they live) and a build function. A :class:`Registry` holds
the plug-ins of one kind: the built-in ones, which its module imports plainly, and those that separately
installed packages declare under the registry's entry point group (``importlib.metadata``), each entry
point naming a :class:`Plugin` or a list of them. ``configure(kind, spec)`` fills the defaults into a
spec and checks it against the kind's schema; ``build(kind, spec, ...)`` then calls the build function.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from collector.util.shipped_verdicts import is_shipped

log = logging.getLogger(__name__)

B = TypeVar("B", bound=Callable[..., Any])


class UnknownKind(LookupError):
    """No plug-in of that kind is registered."""


class PluginConfigError(ValueError):
    """A plug-in's configuration breaks its schema."""


@dataclass(frozen=True, slots=True)
class Plugin(Generic[B]):
    """A kind name -> the schema of its configuration -> the function that builds it."""

    kind: str
    build: B
    schema: Mapping[str, Any] = field(default_factory=dict)  # JSON Schema; {} accepts any object


class Registry(Generic[B]):
    """The plug-ins of one kind. Later registrations of a kind replace earlier ones (an installed
    package may replace a built-in)."""

    def __init__(self, what: str, builtin: Iterable[Plugin[B]], group: str | None = None,
                 discovered: Callable[[str], Iterable[EntryPoint]] | None = None) -> None:
        self.what = what
        self.group = group
        plugins = list(builtin)
        if group is not None:
            plugins += _from_entry_points(group, discovered or _entry_points)
        self._plugins: dict[str, Plugin[B]] = {p.kind: p for p in plugins}

    def kinds(self) -> list[str]:
        return sorted(self._plugins)

    def kinds_in_order(self) -> list[str]:
        """The kinds in registration order (built-in first)."""
        return list(self._plugins)

    def __contains__(self, kind: object) -> bool:
        return kind in self._plugins

    def get(self, kind: str) -> Plugin[B]:
        try:
            return self._plugins[kind]
        except KeyError:
            known = ", ".join(self.kinds()) or "none"
            raise UnknownKind(f"unknown {self.what} {kind!r} (known: {known})") from None

    def configure(self, kind: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        """``spec`` with the schema's defaults filled in, checked against the schema."""
        schema = self.get(kind).schema
        config = with_defaults(schema, spec)
        if is_shipped(schema, config):  # a built-in definition's spec as shipped: checked by the tests
            return config
        import jsonschema  # only when something is to be checked (its import is a sixth of a cold start)

        errors = sorted(jsonschema.validators.validator_for(schema)(schema).iter_errors(config),
                        key=lambda e: list(e.absolute_path))
        if errors:
            raise PluginConfigError(f"{self.what} {kind!r}: at {errors[0].json_path}: {errors[0].message}")
        return config

    def build(self, kind: str, spec: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
        return self.get(kind).build(self.configure(kind, spec), *args, **kwargs)


def with_defaults(schema: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``spec`` with every missing property that has a ``default`` in ``schema`` set to it,
    nested objects included."""
    out = copy.deepcopy(dict(spec))
    for name, prop in dict(schema.get("properties", {})).items():
        if not isinstance(prop, Mapping):
            continue
        if name not in out and "default" in prop:
            out[name] = copy.deepcopy(prop["default"])
        elif isinstance(out.get(name), Mapping) and prop.get("type") == "object":
            out[name] = with_defaults(prop, out[name])
    return out


def _entry_points(group: str) -> Iterable[EntryPoint]:
    return entry_points(group=group)


def _from_entry_points(group: str, discovered: Callable[[str], Iterable[EntryPoint]]) -> list[Plugin[Any]]:
    out: list[Plugin[Any]] = []
    for point in discovered(group):
        try:
            loaded = point.load()
        except Exception as exc:  # noqa: BLE001 - a broken add-on package must not stop the collector
            log.error("plug-in %s (%s) in %s cannot be loaded: %r; skipped", point.name, point.value, group, exc)
            continue
        items = loaded if isinstance(loaded, list | tuple) else [loaded]
        for item in items:
            if isinstance(item, Plugin):
                out.append(item)
            else:
                log.error("plug-in %s in %s is not a collector.registry.Plugin; skipped", point.name, group)
    return out
