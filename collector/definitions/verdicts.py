"""Schema verdicts remembered across runs, so that a warm start does not check unchanged agent definitions
against their JSON Schema again (nor the schema itself against its meta-schema): about a fifth of the
start-up CPU of every ``collect --once``.

A verdict is the digest of what was checked: the jsonschema version, the schema and the document (its
canonical JSON: keys sorted). Only "valid" is remembered: a document with problems is checked every time
(its problems are what is reported), and a changed file, schema or jsonschema makes another digest, which
is checked again. The file (``<state dir>/schema-verdicts.json``, 0600) is a cache: unreadable or broken,
it is ignored and written anew; it keeps the latest ``KEEP`` digests.
"""

from __future__ import annotations

import contextlib
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import orjson

from collector.util.atomic import replace_atomically
from collector.util.shipped_verdicts import plain_digest

FILE = "schema-verdicts.json"
MAX_BYTES = 1024 * 1024  # read no more of it (a few hundred digests in practice)
KEEP = 256


@cache
def _library() -> bytes:
    try:
        return f"jsonschema {version('jsonschema')}\n".encode()
    except PackageNotFoundError:
        return b"jsonschema ?\n"


def digest(schema: dict[str, Any], document: Any) -> str:
    """What a verdict on ``document`` checked against ``schema`` is remembered by (with the jsonschema
    version: another version checks again)."""
    return plain_digest(schema, document, _library())


class Verdicts:
    """The digests found valid before (``path`` None: remember within this object only)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._valid: dict[str, None] = dict.fromkeys(self._read())  # insertion order: oldest first
        self._changed = False

    def _read(self) -> list[str]:
        if self.path is None:
            return []
        from collector.util.regular import read_regular  # a FIFO or device there is refused, not waited on

        raw = read_regular(str(self.path), limit=MAX_BYTES)
        try:
            data = orjson.loads(raw) if raw is not None else None
        except orjson.JSONDecodeError:
            return []
        valid = data.get("valid") if isinstance(data, dict) else None
        return [d for d in valid if isinstance(d, str)] if isinstance(valid, list) else []

    def __contains__(self, key: object) -> bool:
        return key in self._valid

    def add(self, key: str) -> None:
        if key not in self._valid:
            self._valid[key] = None
            self._changed = True

    def save(self) -> None:
        """Write the file when a verdict was added and its folder exists (best effort: it is a cache)."""
        if not self._changed or self.path is None or not self.path.parent.is_dir():
            return
        keep = list(self._valid)[-KEEP:]
        with contextlib.suppress(OSError):
            replace_atomically(self.path, orjson.dumps({"valid": keep}))
            self._changed = False
