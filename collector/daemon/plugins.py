"""Every plug-in registry in one place, and the check of an agent definition against them.

The registries (each a :class:`collector.registry.Registry`: kind -> schema -> build function):
parsers (:mod:`collector.agents.registry`), source kinds (:mod:`collector.sources.factory`), integration
kinds (:mod:`collector.deploy.kinds`), trust stores (:mod:`collector.deploy.trust`) and exporters
(:mod:`collector.exporters.registry`). :func:`load_agents` loads the definitions and keeps only those
whose parser, sources, integrations and trust stores are registered and configured as their schemas say.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collector.agents.registry import parsers
from collector.definitions import DefinitionProblem, LoadResult, load_definitions
from collector.definitions.verdicts import Verdicts
from collector.deploy.kinds import integration_kinds
from collector.deploy.trust import trust_stores
from collector.exporters.registry import exporters
from collector.registry import PluginConfigError, Registry, UnknownKind
from collector.sources.factory import source_kinds


def registries() -> dict[str, Registry[Any]]:
    return {"parsers": parsers(), "source kinds": source_kinds(), "integration kinds": integration_kinds(),
            "trust stores": trust_stores(), "exporters": exporters()}


def check_definition(data: dict[str, Any], file: str) -> list[DefinitionProblem]:
    """Problems of a (schema-valid) definition that only the registries can see."""
    problems: list[DefinitionProblem] = []
    if data["parser"] not in parsers():
        problems.append(DefinitionProblem(file, "$.parser", f"no parser {data['parser']!r} is registered "
                                                            f"(known: {', '.join(parsers().kinds())})"))
    for n, spec in enumerate(data.get("sources", [])):
        problems += _configured(source_kinds(), spec["kind"], spec, file, f"$.sources[{n}]")
    for n, spec in enumerate(data.get("integrations", [])):
        where = f"$.integrations[{n}]"
        problems += _configured(integration_kinds(), spec["kind"], spec, file, where)
        trust = spec.get("trust")
        if isinstance(trust, dict) and trust.get("store"):
            problems += _configured(trust_stores(), str(trust["store"]), trust, file, f"{where}.trust", "store")
    return problems


def load_agents(override_dir: Path | None, verdicts: Verdicts | None = None) -> LoadResult:
    """The agent definitions (built-in and the user's), checked against the schema and the registries
    (``verdicts``: see ``collector.definitions.verdicts``)."""
    return load_definitions(override_dir, check=check_definition, verdicts=verdicts)


def _configured(registry: Registry[Any], kind: str, spec: dict[str, Any], file: str,
                where: str, kind_key: str = "kind") -> list[DefinitionProblem]:
    try:
        registry.configure(kind, spec)
    except UnknownKind as exc:
        return [DefinitionProblem(file, f"{where}.{kind_key}", str(exc))]
    except PluginConfigError as exc:
        return [DefinitionProblem(file, where, str(exc))]
    return []
