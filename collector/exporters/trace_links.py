"""What a turn's entries say about the world outside the turn, for its spans: the upstream span it hangs
under (``upstream.trace_id``/``upstream.parent_span_id``, stamped by ``collector.pipeline.invocation``, or
by ``collector.pipeline.turn_links`` from a correlation file, when ``collector.upstream_trace_link`` is
on) and the custom attributes the pipeline stamped on it (the keys it names in
``collector.custom_attributes``, ``collector.pipeline.attributes``), which every span of the turn carries, as
LoongSuite Pilot puts its custom span attributes on spans."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from collector.pipeline.attributes import MARK
from collector.pipeline.turn_links import SOURCE

_HEX = re.compile(r"[0-9a-f]{32}-[0-9a-f]{16}\Z")  # upstream trace id - parent span id


def upstream_of(entries: Iterable[Mapping[str, Any]]) -> tuple[int, int] | None:
    """(trace id, parent span id) of the entry naming a usable upstream span (lowercase hex of the W3C
    lengths, not all zero), or None: one whose span a correlation file's turn record named, else a session
    record, else the first (``upstream.correlation``, ``collector.pipeline.turn_links``)."""
    found: dict[object, tuple[int, int]] = {}
    for entry in entries:
        source = entry.get(SOURCE)
        if source in found:
            continue
        trace, parent = entry.get("upstream.trace_id"), entry.get("upstream.parent_span_id")
        if isinstance(trace, str) and isinstance(parent, str) and _HEX.match(f"{trace}-{parent}"):
            ids = int(trace, 16), int(parent, 16)
            if all(ids):
                found[source] = ids
                if source == "turn":
                    break
    return found.get("turn") or found.get("session") or next(iter(found.values()), None)


def custom_of(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The custom attributes of the first entry that names any (its ``collector.custom_attributes``)."""
    for entry in entries:
        keys = entry.get(MARK)
        if isinstance(keys, list) and keys:
            return {k: entry[k] for k in keys if isinstance(k, str) and k in entry}
    return {}
