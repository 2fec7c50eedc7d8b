"""A raw record as a source yields it, before any agent-specific parsing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

REFUSED = "refused"  # a meta key: why the source refuses the record (the boundary quarantines it with this reason)
TRUNCATED = "truncated"  # a meta key the boundary sets: why parts of the record were cut (too deep)


@dataclass(slots=True)
class RawRecord:
    """One unit read by a source. Treated as immutable (the boundary hands back a new one rather than
    change it); not ``frozen=True`` only because a frozen dataclass's constructor costs 1 us more (a
    setattr through ``object`` per field), and a backfill makes one per line read.

    ``kind`` says what produced it: ``hook`` (a spool line written by our hook or plugin, or an HTTP
    hook post), ``transcript`` (a line of the agent's own session file), ``sqlite`` (a database row),
    ``json_file`` (a whole JSON document), ``json_item`` (one element of an array in a JSON document, see
    ``collector.sources.json_documents``) or ``command`` (output of an external plugin).
    ``data`` is the decoded JSON object. For spool lines it is our envelope:
    ``{"ts": <receive time, float seconds>, "agent": id, "event": hook event name, "payload": {...}}``.
    ``source_id`` identifies the stream (file identity, database path + table), ``position`` is an
    opaque, stable position inside it (a byte offset, a row id); together they make deterministic ids.
    ``observed_ns`` is when the collector read it. ``meta`` carries source facts such as ``path``.
    ``strict_json``: ``data`` is what ``collector.model.decode`` (or orjson) made of JSON text, so its keys
    are strings, it holds no lone surrogate and no non-finite float; the boundary then checks only its
    depth, size and integers, at C speed (``collector.model.boundary.check_record``).
    ``checked_data``: the object the source found within those bounds itself, with
    ``collector.model.boundary.strict_json_fits``, as it decoded the line (cheaper while the new objects
    are in the CPU's cache); the boundary lets the record in as it is while ``data`` is that very object
    (a copy with other data, ``dataclasses.replace(record, data=...)``, is checked again).
    """

    agent: str
    kind: str
    data: dict[str, Any]
    source_id: str
    position: str
    observed_ns: int
    meta: dict[str, Any] = field(default_factory=dict)
    strict_json: bool = False
    checked_data: Any = field(default=None, repr=False, compare=False)
