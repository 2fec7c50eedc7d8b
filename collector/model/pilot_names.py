"""LoongSuite Pilot's field names beside ours (docs/pilot-field-names.md is the table for users).

Pilot's output event schema (``docs/output-event-schema.md`` of github.com/alibaba/loongsuite-pilot) and
ours share most names (``event.name``, ``gen_ai.session.id``, ``gen_ai.usage.*_tokens``, ``gen_ai.tool.*``,
``error.*``, ``workspace.path``, ...). Where they differ, :data:`RENAMES` pairs them: the canonical parser
reads Pilot's name as ours (:func:`from_pilot`), the JSONL exporter with ``field_names = "pilot"`` writes
ours as Pilot's (:func:`to_pilot`), and the usage store's rebuild reads such a file back
(:func:`from_pilot_output`). A rename that holds only for some events names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Rename:
    ours: str
    pilot: str
    events: frozenset[str] | None = None  # only on these event names; None: on every event
    integer: bool = False  # Pilot's type is an integer (ours may be a number)


TOOL_EVENTS = frozenset({"tool.call", "tool.result"})

RENAMES = (
    # Pilot: "positive tool execution duration in milliseconds" (int); ours: duration_ms (tool.result:
    # execution time; on llm.response it is the model's latency, which Pilot has no field for)
    Rename("duration_ms", "gen_ai.tool.call.duration", TOOL_EVENTS, integer=True),
    # Pilot: "total event cost in USD"; ours: the cost the agent reports for the call
    Rename("gen_ai.usage.cost_usd", "gen_ai.usage.total_cost"),
    # Pilot: the git top-level directory of the working directory; ours also names workspace.path itself
    # outside a repository
    Rename("workspace.root", "workspace.current_root"),
)

# Pilot's content fields that have no name of ours: a user prompt's ``other`` record carries the new
# messages as ``gen_ai.input.messages_delta`` (read as our ``gen_ai.input.messages``).
PROMPT_DELTA = "gen_ai.input.messages_delta"


def _applies(rename: Rename, name: Any) -> bool:
    return rename.events is None or name in rename.events


def from_pilot(data: dict[str, Any], name: Any) -> dict[str, Any]:
    """``data`` (a record of event ``name``) with Pilot's names read as ours; a field of ours that is
    present wins over Pilot's (which is then kept as it is). ``data`` itself is not changed."""
    if not any(r.pilot in data for r in RENAMES):
        return data
    out = dict(data)
    for rename in RENAMES:
        if rename.pilot in out and rename.ours not in out and _applies(rename, name):
            out[rename.ours] = out.pop(rename.pilot)
    return out


def to_pilot(entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` with our names written as Pilot's where they differ (the order of the keys kept), or
    ``entry`` itself when none applies."""
    name = entry.get("event.name")
    renames = {r.ours: r for r in RENAMES if r.ours in entry and _applies(r, name)}
    if not renames:
        return entry
    out: dict[str, Any] = {}
    for key, value in entry.items():
        rename = renames.get(key)
        if rename is None:
            out[key] = value
        else:
            out[rename.pilot] = round(value) if rename.integer and isinstance(value, float) else value
    return out


def from_pilot_output(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry of our own output written with Pilot's names, read back with ours."""
    return from_pilot(entry, entry.get("event.name"))
