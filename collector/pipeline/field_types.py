"""The types a definition declares for the fields its parser dispatches on, checked once per record before
the parser sees it.

A source in ``agents.d`` may say ``"field_types": {"type": "string", "payload.call_id": "string"}``: a
path (``a.b`` walks into objects) and the JSON type, or list of types, its value must have when it is
there (``string``, ``integer``, ``number``, ``boolean``, ``object``, ``array``; a boolean is never a
number). A record whose declared field is present, not null, with another type is not parsed: the
pipeline counts it in ``pipeline.unreadable`` as ``<agent>: <path> is a list, not a string`` (the shape,
never the value). These are the fields that decide what a record is (its kind, its id): read with
another type the parser could only drop it, and a drop must be counted, not silent. Types hold per
record kind (``hook`` for the spool, a jsonl source's ``record_kind``, ``json_file`` and ``json_item``,
``sqlite``, ``command``): the sources of one kind of one agent share their declarations. Every spool
source has ``event`` a string and ``payload`` an object (the envelope is ours).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from collector.model.raw import RawRecord
from collector.util.json_kinds import json_type

_PYTHON: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "object": (dict,), "array": (list,),
}
_NAMES = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
          "object": "an object", "array": "a list"}
TYPE_NAMES = frozenset(_PYTHON)
# the record kinds a source of each built-in kind makes; the others name theirs (``record_kind``)
_RECORD_KINDS = {"spool": ("hook",), "json_file": ("json_file", "json_item"), "sqlite": ("sqlite",)}
_DEFAULT_RECORD_KIND = {"jsonl": "transcript"}
# every spool line is our envelope: the hook's event name and the agent's payload object
_ENVELOPE = {"spool": {"event": "string", "payload": "object"}}


@dataclass(frozen=True, slots=True)
class FieldType:
    path: tuple[str, ...]
    allowed: tuple[str, ...]  # JSON type names

    def problem(self, data: Mapping[str, Any]) -> str | None:
        """None when the field is absent, null or of an allowed type; else the reason, shape only."""
        value: Any = data
        for step in self.path:
            if not isinstance(value, dict):
                return None  # an enclosing object is missing (its own declaration, if any, says so)
            value = value.get(step)
        if value is None or any(_is(value, name) for name in self.allowed):
            return None
        wanted = " or ".join(_NAMES[name] for name in self.allowed)
        return f"{'.'.join(self.path)} is {json_type(value)}, not {wanted}"


def _is(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return name == "boolean"
    return isinstance(value, _PYTHON[name])


@dataclass(frozen=True, slots=True)
class FieldTypes:
    """Per record kind, the declared fields to check (empty: nothing is checked, at no cost)."""

    by_kind: Mapping[str, tuple[FieldType, ...]]

    @classmethod
    def of_sources(cls, sources: Iterable[Mapping[str, Any]]) -> FieldTypes:
        """The declarations of a definition's sources (already valid against the schema), merged per
        record kind: two sources of one kind that type one path differently allow either type."""
        merged: dict[str, dict[tuple[str, ...], list[str]]] = {}
        for spec in sources:
            declared = {**_ENVELOPE.get(str(spec.get("kind")), {}), **(spec.get("field_types") or {})}
            for kind in record_kinds(spec):
                paths = merged.setdefault(kind, {})
                for path, types in declared.items():
                    allowed = paths.setdefault(tuple(path.split(".")), [])
                    allowed += [t for t in ([types] if isinstance(types, str) else types) if t not in allowed]
        return cls({kind: tuple(FieldType(p, tuple(a)) for p, a in paths.items())
                    for kind, paths in merged.items() if paths})

    def problems(self, record: RawRecord) -> list[str]:
        checks = self.by_kind.get(record.kind)
        if not checks:
            return []
        return [p for p in (c.problem(record.data) for c in checks) if p is not None]


def record_kinds(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The record kinds a source spec makes."""
    kind = str(spec.get("kind"))
    return _RECORD_KINDS.get(kind) or (str(spec.get("record_kind") or _DEFAULT_RECORD_KIND.get(kind, kind)),)
