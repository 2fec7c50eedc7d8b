"""The verdicts shipped with the package: the built-in agent definitions (``agents.d/*.json``), the
definition schema and the plug-in specs of those definitions (their sources, integrations and trust
stores and the parser, as the registries fill in their defaults) and the exporters' specs of the
default configuration are valid. So a cold start (a fresh state folder: the
first ``collect --once`` of a new user) need not check them against their schemas again.

Only files exactly as shipped count: a digest of the schema and the document, their canonical JSON. An
edited built-in file, a user override merged into one or another schema makes another digest, which is
checked as before. ``tests/test_definition_verdicts.py`` proves the list matches the files; after
changing one, write it again with ``scripts/ship_verdicts.py``
(``collector.cli.ship_verdicts`` makes the list).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import orjson

FILE = Path(__file__).resolve().parent.parent / "data" / "shipped-verdicts.json"
SCHEMA_CHECK = {"check": "the schema against its meta-schema"}


def plain_digest(schema: Mapping[str, Any], document: Any, prefix: bytes = b"") -> str:
    """The digest of a (schema, document) pair, their canonical JSON (keys sorted) after ``prefix``: none
    here, whatever the jsonschema version; ``collector.definitions.verdicts`` puts the version there."""
    h = hashlib.sha256(prefix)
    h.update(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS))
    h.update(b"\n")
    h.update(orjson.dumps(document, option=orjson.OPT_SORT_KEYS))
    return h.hexdigest()


@cache
def shipped() -> frozenset[str]:
    """The shipped digests; none when the file is missing or broken (then everything is checked)."""
    try:
        data = orjson.loads(FILE.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return frozenset()
    valid = data.get("valid") if isinstance(data, dict) else None
    return frozenset(d for d in valid if isinstance(d, str)) if isinstance(valid, list) else frozenset()


def is_shipped(schema: Mapping[str, Any], document: Any) -> bool:
    return plain_digest(schema, document) in shipped()
