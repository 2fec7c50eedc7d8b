"""Canonical records: a third party's hook or plugin writes records that already use our schema's dotted
names (``event.name``, ``gen_ai.session.id``, ``gen_ai.usage.input_tokens``, ...), and an ``agents.d``
file with ``"parser": "canonical"`` is all the agent needs. docs/canonical-records.md is the contract.

A record is the object itself (a line of a ``jsonl`` source, a ``command`` source's record, a
``json_file`` document) or, from the spool (our hook script or the ingest server), the envelope's
``payload``. The collector owns some fields and sets them itself whatever the record says
(``schema.version``, ``event.id``, ``gen_ai.agent.type`` = the agent's id, ``observed_time_unix_nano``,
``source.kind``, ``user.id``, ``host.name``). Every other field of the schema is checked against
``schemas/activity-event.schema.json``: one of the wrong type is dropped and named in
``collector.invalid_fields``; a record the schema refuses as a whole (no known ``event.name``, a
``tool.call`` without ``gen_ai.tool.call.id``) raises, so the pipeline counts and quarantines it. Fields
the schema does not know are kept under ``agent.<agent id>.<field>`` (left out of the exports unless
``export_agent_fields`` is on). LoongSuite Pilot's records are read as written: its string nanoseconds,
its field names where ours differ (``gen_ai.tool.call.duration`` is ``duration_ms``), its event names.
A time field that holds no time is named in ``collector.invalid_fields``.

Ids are deterministic: ``event.id`` given by the record (any string, e.g. the plugin's own id) is hashed
with the agent, session and event name; without one, the record's content is. The same record read twice
(a replay, a second source) makes the same id, which the pipeline drops.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Any

import orjson

from collector.agents.common import iso_to_ns
from collector.model import AgentActivityEntry, RawRecord, event_id
from collector.model.boundary import Refused
from collector.model.entry import EVENT_NAMES, payload_digest
from collector.model.pilot_names import PROMPT_DELTA, from_pilot
from collector.paths import bundled_schema
from collector.util.epoch import epoch_number_to_ns

if TYPE_CHECKING:
    import jsonschema

OWNED = frozenset({"schema.version", "event.id", "gen_ai.agent.type", "observed_time_unix_nano", "user.id",
                   "host.name", "source.kind", "time_unix_nano", "event.name", "gen_ai.session.id"})


class NotCanonical(Refused):
    """The record is not one the activity-event schema accepts; the quarantine keeps this reason (which
    names fields and rules, never a value)."""


def _schema() -> dict[str, Any]:
    return bundled_schema("activity-event")


@cache
def _validator() -> jsonschema.protocols.Validator:
    import jsonschema  # only once a canonical record comes (its import is a sixth of a cold start)

    schema = _schema()
    return jsonschema.validators.validator_for(schema)(schema)


@cache
def _field_validator(key: str) -> jsonschema.protocols.Validator | None:
    """The validator of one field: its property's schema, else the pattern property it matches."""
    schema = _schema()
    prop = schema["properties"].get(key)
    if prop is None:
        prop = next((v for p, v in schema.get("patternProperties", {}).items() if re.match(p, key)), None)
    if prop is None:
        return None
    return _validator().evolve(schema={**prop, "$defs": schema.get("$defs", {})})


def parse(record: RawRecord) -> list[AgentActivityEntry]:
    given = record.data.get("payload") if record.kind == "hook" else record.data
    if not isinstance(given, dict):
        raise NotCanonical("the record is not a JSON object")
    name = given.get("event.name")
    if name not in EVENT_NAMES:
        raise NotCanonical("event.name is missing or not one of the schema's events")
    name, data = _pilot_record(str(name), given)
    session = data.get("gen_ai.session.id")
    session = str(session) if isinstance(session, (str, int)) and not isinstance(session, bool) and session != "" \
        else None
    attrs, extra = _split(data, record.agent)
    attrs["source.kind"] = record.kind
    attrs.update(extra)
    time_ns, bad_time = _time(data)
    if bad_time:
        attrs["collector.invalid_fields"] = [*attrs.get("collector.invalid_fields", ()), *bad_time]
    time_ns = time_ns or _envelope_time(record)
    native = data.get("event.id")
    key = f"id:{native}" if isinstance(native, (str, int)) and not isinstance(native, bool) else \
        f"content:{payload_digest(given)}"
    entry = AgentActivityEntry(name=str(name), agent=record.agent, time_ns=time_ns or record.observed_ns,
                               observed_ns=record.observed_ns, id=event_id(record.agent, session, name, key),
                               session_id=session, attributes=attrs)
    _check_whole(entry)
    return [entry]


def _pilot_record(name: str, data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """LoongSuite Pilot's record read as ours: its field names where they differ (``collector.model.
    pilot_names``), and an ``other`` carrying the user's input (``gen_ai.input.messages`` or Pilot's
    ``gen_ai.input.messages_delta``: how Pilot writes a turn's prompt) as the ``user.prompt`` it is."""
    data = from_pilot(data, name)
    if name == "other" and (PROMPT_DELTA in data or "gen_ai.input.messages" in data):
        name = "user.prompt"
        data = {**data, "event.name": name}
        if "gen_ai.input.messages" not in data:
            data["gen_ai.input.messages"] = data.pop(PROMPT_DELTA)
    return name, data


def _time(data: dict[str, Any]) -> tuple[int | None, list[str]]:
    """(the record's time in nanoseconds, a note per time field present that is not a time). A field holds
    a number, a string of digits (Pilot writes ``"1778586618041000000"``) or, ``time`` and
    ``time_unix_nano`` alike, RFC 3339; numbers are seconds, ms, us or ns by their size."""
    notes: list[str] = []
    for key in ("time_unix_nano", "time"):
        value = data.get(key)
        if value is None:
            continue
        ns = _epoch_digits(value) if isinstance(value, str) else None
        ns = ns or iso_to_ns(value)
        if ns is not None:  # one before 1970 is the boundary's to replace (collector.time_replaced)
            return ns, notes
        notes.append(f"{key}: must be a time (epoch nanoseconds, a string of digits or RFC 3339)")
    return None, notes


def _epoch_digits(value: str) -> int | None:
    text = value.strip()
    if not (0 < len(text) <= 20 and text.isascii() and text.isdigit()):
        return None
    return epoch_number_to_ns(int(text))


def _split(data: dict[str, Any], agent: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(schema fields that pass their property's schema, everything else under agent.<id>.*)."""
    attrs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    invalid: list[str] = []
    own = f"agent.{agent}."
    for key, value in data.items():
        if key in OWNED or value is None:
            continue
        check = None if key.startswith(own) else _field_validator(key)
        if check is None:
            extra[key if key.startswith(own) else own + key] = value
            continue
        error = _best_match(check.iter_errors(value))
        if error is None:
            attrs[key] = value
        else:
            invalid.append(f"{key}: {_reason(error)}")
    if invalid:
        attrs["collector.invalid_fields"] = invalid
    return attrs, extra


def _check_whole(entry: AgentActivityEntry) -> None:
    doc = entry.to_dict()
    doc.setdefault("user.id", "-")  # set by the pipeline later; required by the schema
    error = _best_match(_validator().iter_errors(doc))
    if error is not None:
        raise NotCanonical(f"the schema refuses it: {_reason(error)}")


def _best_match(errors: Any) -> jsonschema.ValidationError | None:
    from jsonschema.exceptions import best_match

    return best_match(errors)


def _reason(error: jsonschema.ValidationError) -> str:
    """What the schema wants, never the value (it may be content)."""
    if error.validator == "required":
        return error.message[:160]  # names the missing field only
    where = ".".join(str(p) for p in error.absolute_path)
    wanted = orjson.dumps(error.validator_value).decode()[:120]
    return f"{where + ' ' if where else ''}must match {error.validator} {wanted}"


def _envelope_time(record: RawRecord) -> int | None:
    return iso_to_ns(record.data.get("ts")) if record.kind == "hook" else None
