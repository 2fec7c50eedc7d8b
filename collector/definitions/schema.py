"""The agent definition schema (``schemas/agent-definition.schema.json``) and the schemas of the built-in
plug-in kinds it holds (``$defs``), which their registries check a spec against."""

from __future__ import annotations

from typing import Any

from collector.paths import bundled_schema


def definition_schema() -> dict[str, Any]:
    return bundled_schema("agent-definition")


def kind_schema(name: str) -> dict[str, Any]:
    """``$defs[name]`` as a schema of its own (its ``$ref``s still resolve)."""
    defs = definition_schema()["$defs"]
    return {**defs[name], "$defs": defs}
