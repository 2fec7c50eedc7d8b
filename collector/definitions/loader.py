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
from typing import TYPE_CHECKING, Any

import orjson

from collector.definitions.pilot_convert import convert, field_of, is_pilot_definition
from collector.definitions.schema import definition_schema
from collector.definitions.status_rules import AgentStatusRules
from collector.definitions.verdicts import Verdicts, digest
from collector.paths import project_root
from collector.util.shipped_verdicts import SCHEMA_CHECK, is_shipped

if TYPE_CHECKING:
    import jsonschema


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
    # What was said about a file but did not stop it (a LoongSuite Pilot definition converted on load, or
    # not convertible: it is skipped, not a problem, so load_for still starts).
    notices: list[DefinitionProblem] = field(default_factory=list)


@cache
def _plain_validator() -> jsonschema.protocols.Validator:
    import jsonschema  # only when something is to be checked: its import is a sixth of a cold start

    schema = definition_schema()
    return jsonschema.validators.validator_for(schema)(schema)


@cache
def _check_schema(key: str) -> None:
    """Once a process at most for the schema of digest ``key``: it is valid (else ``jsonschema.SchemaError``)."""
    validator = _plain_validator()
    type(validator).check_schema(validator.schema)


class _Checker:
    """The schema check of merged definitions, skipping what is known valid: shipped as it is
    (``collector.definitions.shipped``) or found valid by an earlier run (``verdicts``)."""

    def __init__(self, verdicts: Verdicts) -> None:
        self.verdicts = verdicts
        self.schema = definition_schema()
        self._schema_ok = is_shipped(SCHEMA_CHECK, self.schema)

    def problems(self, data: dict[str, Any], file: str) -> list[DefinitionProblem]:
        if self._schema_ok and is_shipped(self.schema, data):
            return []
        key = digest(self.schema, data)
        if key in self.verdicts:
            return []
        self._check_schema()
        errors = sorted(_plain_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
        if not errors:
            self.verdicts.add(key)
        return [DefinitionProblem(file, e.json_path, e.message) for e in errors]

    def _check_schema(self) -> None:
        key = digest(SCHEMA_CHECK, self.schema)
        if key not in self.verdicts:
            _check_schema(key)
            self.verdicts.add(key)


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


def _from_pilot(data: dict[str, Any], file: str, builtin_ids: frozenset[str],
                notices: list[DefinitionProblem]) -> dict[str, Any] | None:
    """A LoongSuite Pilot definition placed in agents.d: ours converted from it (or None: the built-in one
    stays, or it cannot be converted), with one notice per field not carried."""
    conversion = convert(data, builtin_ids)
    for said, lines in (("not converted", conversion.reasons), ("field not carried", conversion.notes)):
        for line in lines:
            where = field_of(line)
            text = line.removeprefix(f"{where[2:]}: ") if where != "$" else line
            notices.append(DefinitionProblem(file, where, f"LoongSuite Pilot definition, {said}: {text}"))
    return conversion.definition


Check = Callable[[dict[str, Any], str], list[DefinitionProblem]]  # (merged definition, its file) -> problems


def load_definitions(override_dir: Path | None = None, builtin_dir: Path | None = None,
                     check: Check | None = None, verdicts: Verdicts | None = None) -> LoadResult:
    """Every valid definition. ``check`` adds checks beyond the schema (``collector.daemon.plugins`` passes the
    plug-in registries' own: parser, source and integration kinds, trust stores; they run every time).
    ``verdicts``: the schema verdicts of earlier runs (the caller saves them); None: this call's only."""
    root = project_root()
    builtin_dir = builtin_dir or root / "agents.d"
    checker = _Checker(verdicts if verdicts is not None else Verdicts(None))
    result = LoadResult()
    merged: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {}
    for path in _files(builtin_dir):
        data = _read(path, result.problems)
        if data is not None:
            merged[data["id"]] = (data, (str(path),))
    builtin_ids = frozenset(merged)
    for path in _files(override_dir) if override_dir else []:
        data = _read(path, result.problems)
        if data is not None and is_pilot_definition(data):
            data = _from_pilot(data, str(path), builtin_ids, result.notices)
        if data is None:
            continue
        base, files = merged.get(data["id"], ({}, ()))
        candidate = deep_merge(base, data)
        problems = (checker.problems(candidate, str(path)) or _variant_problems(candidate, str(path))
                    or (check(candidate, str(path)) if check else []))
        if problems:  # a broken override leaves the built-in definition as it was
            result.problems.extend(problems)
            continue
        merged[data["id"]] = (candidate, files + (str(path),))
    for agent_id, (data, files) in sorted(merged.items()):
        problems = checker.problems(data, files[-1]) or (check(data, files[-1]) if check else [])
        if problems:
            result.problems.extend(problems)
            continue
        result.agents[agent_id] = AgentDefinition(agent_id, data, files)
    return result
