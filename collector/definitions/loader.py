"""Load agent definitions.

Built-in definitions come from ``agents.d/*.json`` in the project root; the user's config directory may
hold ``agents.d/*.json`` too: a file whose ``id`` matches a built-in deep-merges into it (objects merge
key by key, anything else replaces), a new ``id`` adds an agent. Every file is checked as JSON and, after
merging, against ``schemas/agent-definition.schema.json``. A bad file is reported with its path, the JSON
path of the problem and the reason, and skipped; the others still load. A definition (and the schema) found
valid before is not checked again (``collector.definitions.verdicts``: a changed one is).
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import orjson

from collector.definitions.schema import definition_schema
from collector.definitions.verdicts import Verdicts, digest
from collector.paths import project_root
from collector.pipeline.status_rules import AgentStatusRules


@dataclass(frozen=True, slots=True)
class DefinitionProblem:
    file: str
    json_path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: at {self.json_path}: {self.reason}"


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    id: str
    raw: dict[str, Any]
    files: tuple[str, ...]

    @property
    def name(self) -> str:
        return str(self.raw.get("name", self.id))

    @property
    def parser(self) -> str:
        return str(self.raw["parser"])

    @property
    def enabled(self) -> bool:
        return bool(self.raw.get("enabled", True))

    @property
    def variant(self) -> str | None:
        value = self.raw.get("integration_variant")
        return value if isinstance(value, str) else None

    @property
    def integrations(self) -> list[dict[str, Any]]:
        """The integrations to deploy: those of the chosen variant, and those that have no variant."""
        chosen = self.variant
        return [i for i in self.raw.get("integrations", []) if i.get("variant") in (None, chosen)]

    @property
    def sources(self) -> list[dict[str, Any]]:
        return list(self.raw.get("sources", []))

    @property
    def provider(self) -> str | None:
        value = self.raw.get("provider")
        return value if isinstance(value, str) else None

    @property
    def status_rules(self) -> AgentStatusRules:
        """What the agent's hook events do to its sessions' status (the ``status`` section)."""
        return AgentStatusRules.from_data(self.raw.get("status"))

    @property
    def content_capture(self) -> bool:
        return bool(self.raw.get("content_capture", False))


@dataclass(slots=True)
class LoadResult:
    agents: dict[str, AgentDefinition] = field(default_factory=dict)
    problems: list[DefinitionProblem] = field(default_factory=list)


_SCHEMA_CHECK = {"check": "the schema against its meta-schema"}


@cache
def _plain_validator() -> jsonschema.protocols.Validator:
    schema = definition_schema()
    return jsonschema.validators.validator_for(schema)(schema)


@cache
def _check_schema(key: str) -> None:
    """Once a process at most for the schema of digest ``key``: it is valid (else ``jsonschema.SchemaError``)."""
    validator = _plain_validator()
    type(validator).check_schema(validator.schema)


def _validator(verdicts: Verdicts) -> jsonschema.protocols.Validator:
    validator = _plain_validator()
    key = digest(_SCHEMA_CHECK, validator.schema)
    if key not in verdicts:
        _check_schema(key)
        verdicts.add(key)
    return validator


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _read(path: Path, problems: list[DefinitionProblem]) -> dict[str, Any] | None:
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        problems.append(DefinitionProblem(str(path), "$", f"not valid JSON: {exc}"))
        return None
    except OSError as exc:
        problems.append(DefinitionProblem(str(path), "$", f"cannot read: {exc.strerror or exc}"))
        return None
    if not isinstance(data, dict):
        problems.append(DefinitionProblem(str(path), "$", "must be a JSON object"))
        return None
    if not isinstance(data.get("id"), str):
        problems.append(DefinitionProblem(str(path), "$.id", "missing or not a string"))
        return None
    return data


def _problems_of(validator: jsonschema.protocols.Validator, data: dict[str, Any], file: str,
                 verdicts: Verdicts) -> list[DefinitionProblem]:
    key = digest(validator.schema, data)
    if key in verdicts:
        return []
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if not errors:
        verdicts.add(key)
    return [DefinitionProblem(file, e.json_path, e.message) for e in errors]


def _variant_problems(data: dict[str, Any], file: str) -> list[DefinitionProblem]:
    """``integration_variant`` must name a variant the integrations have (a typo would deploy nothing)."""
    chosen = data.get("integration_variant")
    variants = sorted({i["variant"] for i in data.get("integrations", []) if isinstance(i, dict) and "variant" in i})
    if chosen is None or not variants or chosen in variants:
        return []
    near = difflib.get_close_matches(str(chosen), variants, n=1, cutoff=0.5)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return [DefinitionProblem(file, "$.integration_variant",
                              f"unknown variant {chosen!r} ({hint}valid: {', '.join(variants)})")]


def _files(directory: Path) -> Iterable[Path]:
    return sorted(directory.glob("*.json")) if directory.is_dir() else []


Check = Callable[[dict[str, Any], str], list[DefinitionProblem]]  # (merged definition, its file) -> problems


def load_definitions(override_dir: Path | None = None, builtin_dir: Path | None = None,
                     check: Check | None = None, verdicts: Verdicts | None = None) -> LoadResult:
    """Every valid definition. ``check`` adds checks beyond the schema (``collector.plugins`` passes the
    plug-in registries' own: parser, source and integration kinds, trust stores; they run every time).
    ``verdicts``: the schema verdicts of earlier runs (the caller saves them); None: this call's only."""
    root = project_root()
    builtin_dir = builtin_dir or root / "agents.d"
    verdicts = verdicts if verdicts is not None else Verdicts(None)
    validator = _validator(verdicts)
    result = LoadResult()
    merged: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {}
    for path in _files(builtin_dir):
        data = _read(path, result.problems)
        if data is not None:
            merged[data["id"]] = (data, (str(path),))
    for path in _files(override_dir) if override_dir else []:
        data = _read(path, result.problems)
        if data is None:
            continue
        base, files = merged.get(data["id"], ({}, ()))
        candidate = deep_merge(base, data)
        problems = (_problems_of(validator, candidate, str(path), verdicts) or _variant_problems(candidate, str(path))
                    or (check(candidate, str(path)) if check else []))
        if problems:  # a broken override leaves the built-in definition as it was
            result.problems.extend(problems)
            continue
        merged[data["id"]] = (candidate, files + (str(path),))
    for agent_id, (data, files) in sorted(merged.items()):
        problems = _problems_of(validator, data, files[-1], verdicts) or (check(data, files[-1]) if check else [])
        if problems:
            result.problems.extend(problems)
            continue
        result.agents[agent_id] = AgentDefinition(agent_id, data, files)
    return result
