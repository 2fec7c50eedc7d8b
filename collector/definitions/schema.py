"""The agent definition schema (``schemas/agent-definition.schema.json``) and the schemas of the built-in
plug-in kinds it holds (``$defs``), which their registries check a spec against."""

from __future__ import annotations

from functools import cache
from typing import Any

import orjson

from collector.paths import project_root


@cache
def definition_schema() -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((project_root() / "schemas" / "agent-definition.schema.json").read_bytes())
    return data


def kind_schema(name: str) -> dict[str, Any]:
    """``$defs[name]`` as a schema of its own (its ``$ref``s still resolve)."""
    defs = definition_schema()["$defs"]
    return {**defs[name], "$defs": defs}
