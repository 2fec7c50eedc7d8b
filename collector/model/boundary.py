"""Types and ranges, checked once where data enters the pipeline, so no later stage meets a surprise.

Two checks, both applied by the pipeline to every agent's records and entries (parsers need no checks of
their own):

- ``check_record``: before any parser or digest walks a record, its nesting depth and number of values are
  measured without recursion; a record larger than ``MAX_NODES`` is refused; in one deeper than
  ``MAX_DEPTH`` each container below that depth is replaced by the string :data:`DEEP_MARK` (a deep tool
  input costs only its own depths, not the record's model call and tokens) and the record says so in
  its meta (``TRUNCATED``): its entries carry ``collector.truncated``.
- ``check_entry``: after parsing, every field of the schema gets its type: ids and names are strings
  (numbers are converted, anything else is refused), token counts and lengths are integers in
  ``[0, 2**53)`` (exact for every JSON reader; sums stay within 64 bits), durations and costs finite
  non-negative numbers, enums one of their values, other values no deeper than ``MAX_DEPTH`` (integers
  beyond int64 become strings). A refused optional field is dropped and named in
  ``collector.invalid_fields`` (field and reason, never the value); a refused field an event cannot do
  without raises ``Refused``. Times outside ``(1970-01-01, a year from now]`` are replaced by the
  observed time, and ``collector.time_replaced`` says why.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import replace
from typing import Any

import orjson

from collector.model.raw import REFUSED, TRUNCATED, RawRecord

MAX_DEPTH = 64
DEEP_MARK = f"[left out: nested deeper than {MAX_DEPTH}]"
MAX_NODES = 1_000_000
INT64_MAX = 2**63 - 1
MAX_COUNT = 2**53 - 1  # token counts: exact in every JSON reader, and sums over a session stay in int64
MIN_TIME_NS = 1  # 0 (1970-01-01T00:00:00Z) is how writers say "no time": missing, the observed time stands
MAX_FUTURE_NS = 366 * 86_400 * 10**9
MAX_DURATION_MS = 366 * 86_400 * 1000

STRING_FIELDS = frozenset({
    "user.id", "host.name", "gen_ai.agent.type", "gen_ai.agent.id", "gen_ai.session.id", "gen_ai.turn.id",
    "gen_ai.provider.name", "gen_ai.operation.name", "gen_ai.request.model", "gen_ai.response.model",
    "gen_ai.request.id", "gen_ai.response.id", "gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.type",
    "tool.approve.decision", "error.type", "gen_ai.subagent.type", "gen_ai.subagent.parent_tool_call.id",
    "gen_ai.subagent.id", "gen_ai.session.parent.id", "session.source", "session.reason", "prompt.origin",
    "compaction.trigger", "workspace.path", "source.kind", "agent.hook_event_name", "agent.model", "error.message",
    "gen_ai.skill.name", "gen_ai.skill.id", "gen_ai.skill.description", "gen_ai.skill.version",
    "budget.name", "budget.project", "budget.repo",
})
COUNT_FIELDS = frozenset({
    "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.reasoning_tokens", "gen_ai.usage.total_tokens",
    "gen_ai.request.max_tokens", "compaction.pre_tokens", "http.response.status_code",
    "gen_ai.response.time_to_first_token",
})
NUMBER_FIELDS = frozenset({"gen_ai.usage.cost_usd", "duration_ms"})
ENUM_FIELDS: dict[str, frozenset[str | None]] = {
    "gen_ai.agent.scope": frozenset({"subagent"}),
    "tool.result.status": frozenset({"success", "error", "cancelled", "unknown"}),
    "session.status": frozenset({"idle", "running", "waiting_for_input", "ready_for_review", "closed", "error"}),
    "session.previous_status": frozenset({"idle", "running", "waiting_for_input", "ready_for_review", "closed",
                                          "error", None}),
    # the collector's own entries and links (budget.threshold, a correlation file's turn or session)
    "budget.period": frozenset({"day", "week", "month", "block", "session"}),
    "budget.unit": frozenset({"usd", "tokens"}),
    "budget.level": frozenset({"warn", "over"}),
    "upstream.correlation": frozenset({"turn", "session"}),
}
STRING_LIST_FIELDS = frozenset({"gen_ai.response.finish_reasons"})
LIST_FIELDS = frozenset({"gen_ai.input.messages", "gen_ai.output.messages"})
# Fields an event cannot do without (the schema's conditional requirements).
REQUIRED_BY_EVENT = {
    "tool.call": ("gen_ai.tool.call.id",),
    "tool.result": ("gen_ai.tool.call.id",),  # tool.result.status is optional (Pilot's records have none)
    "session.status": ("session.status",),
}
OURS = frozenset({"schema.version", "event.id", "event.name", "time_unix_nano", "observed_time_unix_nano"})


_SURROGATE = re.compile("[\ud800-\udfff]")


class Refused(Exception):
    """The record or entry cannot be made valid; it goes to quarantine with this reason."""


def shape(value: Any, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> str | None:
    """Why ``value`` is too deep or too large to walk, or None. Iterative: never recurses itself."""
    return _scan(value, max_depth, max_nodes)[0]


def _scan(value: Any, max_depth: int, max_nodes: int) -> tuple[str | None, bool]:
    """(problem, whether some value needs making safe: an integer outside int64, a float that is not
    finite, a key that is not a string, a lone surrogate). Leaves are judged as they are met (by exact
    type first: most values are plain ASCII strings), only containers go on the stack."""
    if not isinstance(value, (dict, list, tuple)):
        return None, _unsafe_leaf(value)
    stack: list[tuple[Any, int]] = [(value, 1)]
    nodes = 1
    unsafe = False
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return f"nested deeper than {max_depth}", unsafe
        if isinstance(item, dict):
            unsafe = unsafe or not all(type(k) is str and (k.isascii() or not _SURROGATE.search(k))
                                       for k in item)
            children: Any = item.values()
        else:
            children = item
        for child in children:
            nodes += 1
            kind = type(child)
            if kind is str:
                if not unsafe and not child.isascii():
                    unsafe = _SURROGATE.search(child) is not None
                continue
            if child is None or kind is bool:
                continue
            if kind is dict or kind is list or isinstance(child, (dict, list, tuple)):
                stack.append((child, depth + 1))
            elif not unsafe:
                unsafe = _unsafe_leaf(child)
        if nodes > max_nodes:
            return f"more than {max_nodes} values", unsafe
    return None, unsafe


_TOO_DEEP = b"\n" + b" " * (2 * MAX_DEPTH)  # a value inside a container MAX_DEPTH deep, indented by orjson


def strict_json_fits(data: Any) -> bool:
    """For data decoded from JSON (string keys, no lone surrogate, finite floats): True when it is also
    within MAX_DEPTH, MAX_NODES and 2**53 as the walk in ``_scan`` would find, judged from orjson's
    indented encoding: every value inside a container starts a line of its own, indented two spaces per
    level, so a line indented 2 * MAX_DEPTH spaces is the only way to hold a container deeper than
    MAX_DEPTH, and fewer than MAX_NODES lines means fewer values (a text shorter than MAX_NODES bytes
    cannot hold that many lines, so only a longer one is counted). Conservative: False sends the data to
    the walk (integers beyond 2**53, which orjson's strict mode refuses, a leaf at the deepest level).
    Sources call it as they decode, while the new objects are still in the CPU's cache, and say so in
    ``RawRecord.checked_data``: on the Claude corpus that halves its cost."""
    try:
        text = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_STRICT_INTEGER)
    except orjson.JSONEncodeError:
        return False
    return _TOO_DEEP not in text and (len(text) < MAX_NODES or text.count(b"\n") < MAX_NODES)


def _unsafe_leaf(item: Any) -> bool:
    if isinstance(item, int) and not isinstance(item, bool):
        return not -INT64_MAX - 1 <= item <= INT64_MAX
    if isinstance(item, float):
        return not math.isfinite(item)
    if isinstance(item, str):
        return not item.isascii() and _SURROGATE.search(item) is not None
    return False


def check_record(record: RawRecord) -> RawRecord:
    """The record itself if every walker can take it (at once when its source checked this very data,
    ``RawRecord.checked_data``); a copy with unsafe values made safe (integers
    beyond int64 and non-finite floats as strings, keys as strings, lone surrogates as U+FFFD);
    ``Refused`` if too deep or large, or if its source refused it (``REFUSED`` in its meta: a row whose
    watermark cannot be a position)."""
    if REFUSED in record.meta:
        raise Refused(str(record.meta[REFUSED]))
    if record.checked_data is record.data or (record.strict_json and strict_json_fits(record.data)):
        return record
    problem, unsafe = _scan(record.data, MAX_DEPTH, MAX_NODES)
    if problem and problem.startswith("nested"):
        data = cut_below(record.data, MAX_DEPTH)
        problem, unsafe = _scan(data, MAX_DEPTH, MAX_NODES)
        record = replace(record, data=data, meta={**record.meta, TRUNCATED: f"nested deeper than {MAX_DEPTH}"},
                         checked_data=None)
    if problem:
        raise Refused(problem)
    return replace(record, data=within_int64(record.data)) if unsafe else record


def cut_below(value: Any, max_depth: int) -> Any:
    """A copy of ``value`` whose containers deeper than ``max_depth`` (the top one is 1) are
    :data:`DEEP_MARK`; the copy stops at that depth, so it is never deeper. Iterative."""
    root = _shallow(value)
    stack: list[tuple[Any, int]] = [(root, 1)]
    while stack:
        item, depth = stack.pop()
        for key in list(item) if isinstance(item, dict) else range(len(item)):
            child = item[key]
            if isinstance(child, (dict, list, tuple)):
                if depth >= max_depth:
                    item[key] = DEEP_MARK
                else:
                    copy = _shallow(child)
                    item[key] = copy
                    stack.append((copy, depth + 1))
    return root


def _shallow(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else list(value)


def check_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """Give every known field its type (see the module docstring); returns ``entry``, changed in place.
    Values that already have their type (``_fits``: most of them, as the parsers build them) are left as
    they are at once; the others take the full check (``_checked``)."""
    _check_time(entry)
    doubtful = [key for key, value in entry.items()  # a string field's string: the commonest, judged here
                if key not in OURS and (value.__class__ is not str or key not in STRING_FIELDS)
                and not _fits(key, value)]
    invalid: list[str] = []
    for key in doubtful:
        value, problem = _checked(key, entry[key])
        if problem is None:
            entry[key] = value
        else:
            del entry[key]
            invalid.append(f"{key}: {problem}")
    duration = entry.get("duration_ms")
    if duration is not None and duration > min(entry["time_unix_nano"] // 1_000_000, MAX_DURATION_MS):
        del entry["duration_ms"]  # it would start before 1970, or run for more than a year
        invalid.append("duration_ms: longer than a year or than the time since 1970")
    missing = [k for k in REQUIRED_BY_EVENT.get(entry["event.name"], ()) if k not in entry]
    if missing:
        raise Refused(f"{entry['event.name']} without a valid {', '.join(missing)} ({'; '.join(invalid)})")
    if invalid:
        entry["collector.invalid_fields"] = invalid
    return entry


_TYPED = COUNT_FIELDS | NUMBER_FIELDS | ENUM_FIELDS.keys() | STRING_LIST_FIELDS | LIST_FIELDS | STRING_FIELDS
_INDENTED_AT_MOST = 256 * 1024  # bytes of a value's JSON judged by its indented encoding; a longer one is walked
_PLAIN_JSON = (orjson.OPT_STRICT_INTEGER | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
               | orjson.OPT_PASSTHROUGH_SUBCLASS)


def _fits(key: str, value: Any) -> bool:
    """True when ``_checked`` would keep ``value`` as it is (False: it may not; the full check decides).
    By the exact class first: the values parsers build are plain strings, numbers and JSON containers."""
    kind = value.__class__
    if kind is str:
        if key in STRING_FIELDS:
            return True
        if key in _TYPED or key.endswith(".length"):
            return key in ENUM_FIELDS and value in ENUM_FIELDS[key]
        return value.isascii() or _SURROGATE.search(value) is None
    if kind is int:
        if key in COUNT_FIELDS or key.endswith(".length"):
            return 0 <= value <= MAX_COUNT
        if key in NUMBER_FIELDS:
            return 0 <= value <= INT64_MAX
        return key not in _TYPED and -INT64_MAX - 1 <= value <= INT64_MAX
    if kind is list:
        if key in STRING_LIST_FIELDS:
            return all(v.__class__ is str for v in value)
        return (key in LIST_FIELDS or key not in _TYPED) and not key.endswith(".length") and _plain_json(value)
    if kind is dict:
        return key not in _TYPED and not key.endswith(".length") and _plain_json(value)
    if kind is float:
        if key in NUMBER_FIELDS:
            return math.isfinite(value) and 0 <= value <= INT64_MAX
        return key not in _TYPED and not key.endswith(".length") and math.isfinite(value)
    return False


def _plain_json(value: list[Any] | dict[str, Any]) -> bool:
    """True when the walk (``shape``, ``within_int64``) would find nothing to refuse or to change in the
    container ``value``, judged at C speed from its orjson encoding: string keys, no lone surrogate and
    integers within 2**53 (or orjson refuses it); fewer bytes than MAX_NODES (each value takes one at
    least); not deeper than MAX_DEPTH: at most that many opening brackets (a deeper container needs more;
    those in strings count too), else by its indented encoding as ``strict_json_fits`` judges it; and the
    encoding decodes to an equal value: orjson writes what the walk would make a string of (a non-finite
    float, a tuple, an enum, a UUID) as something else."""
    try:
        text = orjson.dumps(value, option=_PLAIN_JSON)
    except orjson.JSONEncodeError:
        return False
    if len(text) >= MAX_NODES:
        return False
    if text.count(b"[") + text.count(b"{") > MAX_DEPTH:  # it may be too deep: judged as strict_json_fits does
        if len(text) > _INDENTED_AT_MOST:
            return False  # the indented copy would cost more memory than the walk
        if _TOO_DEEP in orjson.dumps(value, option=_PLAIN_JSON | orjson.OPT_INDENT_2):
            return False
    return bool(orjson.loads(text) == value)


def valid_time(value: Any, observed_ns: int) -> bool:
    """Epoch nanoseconds after 1970-01-01T00:00:00 up to a year after the later of now and ``observed_ns``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < MIN_TIME_NS:
        return False
    return value <= max(observed_ns, time.time_ns()) + MAX_FUTURE_NS


def _check_time(entry: dict[str, Any]) -> None:
    observed = entry.get("observed_time_unix_nano")
    if not (isinstance(observed, int) and 0 < observed <= INT64_MAX):
        raise Refused("observed_time_unix_nano is not a time")
    value = entry.get("time_unix_nano")
    if value.__class__ is int and MIN_TIME_NS <= value <= observed + MAX_FUTURE_NS:
        return  # valid_time without the clock: a year after the observed time is within a year of now too
    if not valid_time(value, observed):
        entry["time_unix_nano"] = observed
        entry["collector.time_replaced"] = "out_of_range"


def _checked(key: str, value: Any) -> tuple[Any, str | None]:
    if key in STRING_FIELDS:
        return _as_string(value)
    if key in COUNT_FIELDS or key.endswith(".length"):
        return _as_count(value)
    if key in NUMBER_FIELDS:
        return _as_number(value)
    if key in ENUM_FIELDS:
        return (value, None) if _hashable(value) and value in ENUM_FIELDS[key] else (None, "not one of the values")
    if key in STRING_LIST_FIELDS:
        if not isinstance(value, list):
            return None, f"a {type(value).__name__}, not a list"
        items = [_as_string(v) for v in value]
        return [v for v, problem in items if problem is None], None
    if key in LIST_FIELDS and not isinstance(value, list):
        return None, f"a {type(value).__name__}, not a list"
    problem = shape(value, MAX_DEPTH)
    return (value, problem) if problem else (within_int64(value), None)


def _as_string(value: Any) -> tuple[Any, str | None]:
    if isinstance(value, str):
        return value, None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value), None
    if isinstance(value, float) and math.isfinite(value):
        return (str(int(value)) if value.is_integer() else repr(value)), None
    return None, f"a {type(value).__name__}, not a string"


def _as_count(value: Any) -> tuple[Any, str | None]:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        return None, f"a {type(value).__name__}, not an integer"
    if not 0 <= value <= MAX_COUNT:
        return None, "outside 0..2**53-1"
    return value, None


def _as_number(value: Any) -> tuple[Any, str | None]:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None, f"a {type(value).__name__}, not a number"
    if not (math.isfinite(value) and 0 <= value <= INT64_MAX):
        return None, "not a finite number in 0..2**63-1"
    return value, None


def _hashable(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def within_int64(value: Any) -> Any:
    """Integers an encoder cannot carry (outside int64 / uint64) become strings, lone UTF-16 surrogates
    (no UTF-8 encoder takes them) U+FFFD; shape() already bounded the walk, so this recursion is at most
    MAX_DEPTH deep."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if -INT64_MAX - 1 <= value <= INT64_MAX else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, list):
        return [within_int64(v) for v in value]
    if isinstance(value, dict):
        return {_SURROGATE.sub("\ufffd", str(k)): within_int64(v) for k, v in value.items()}
    if isinstance(value, str):
        return value if value.isascii() else _SURROGATE.sub("\ufffd", value)
    if value is None:
        return value
    return str(value)
