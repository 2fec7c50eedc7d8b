"""The usage store's rows: what one entry becomes in ``events`` (as it is bound: ``''`` for NULL) and in
``sessions``, and the integer key of an event id. Numbers and labels only, never content text: a tool's
arguments are kept as their keyed digest (the content policy's ``.hmac``, or a digest made here when content
capture kept the text) and its result as its length in bytes, so the reports can find repeated calls and
estimate what a result adds to the context (docs/reports.md)."""

from __future__ import annotations

import functools
import hashlib
import math
import time
from collections.abc import Iterable
from typing import Any

from collector.util.content_bytes import content_bytes
from collector.util.git_url import normalise

_KEY_BIAS = 1 << 63
_KEY_MASK = (1 << 64) - 1
_INT64 = 1 << 63
DETAIL_COLUMNS = ("agent_id", "call_id", "parent_call", "args_digest", "result_bytes")  # schema 6


def utc_day(time_ns: int) -> str:
    return _day_name(math.floor(time_ns / 1e9) // 86_400)  # the second as gmtime(time_ns / 1e9) saw it


@functools.lru_cache(maxsize=1024)
def _day_name(day: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(day * 86_400))


def _int(entry: dict[str, Any], key: str) -> int:
    return _as_int(entry.get(key))


def _as_int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _as_num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text(entry: dict[str, Any], key: str) -> str | None:
    value = entry.get(key)
    return value if isinstance(value, str) and value else None


_TEXTS = ("gen_ai.session.id", "gen_ai.turn.id", "gen_ai.agent.scope", "gen_ai.provider.name", "gen_ai.response.model",
          "gen_ai.request.model", "gen_ai.tool.name", "tool.result.status", "error.type", "error.message")
_INTS = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens",
         "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.reasoning_tokens")


def event_row(entry: dict[str, Any]) -> tuple[Any, ...]:
    """The store's row for one entry as it is bound (its key first, ``''`` for NULL): numbers and labels only, never
    content text (``detail`` holds an error message only when content capture kept ``error.message`` in the
    entry). Labels are non-empty strings, token counts ints (0 when absent or not a number), cost and
    latency floats, the HTTP status an int."""
    get = entry.get
    time_ns = int(entry["time_unix_nano"])
    session, turn, scope, provider, response_model, request_model, tool, tool_status, error_type, detail = [
        v if isinstance(v, str) and v else "" for v in map(get, _TEXTS)]
    tokens = [0 if v is None else v if type(v) is int else _as_int(v) for v in map(get, _INTS)]
    cost, duration, http_status = get("gen_ai.usage.cost_usd"), get("duration_ms"), get("http.response.status_code")
    event_id = entry["event.id"]
    return (event_key(event_id), event_id, entry["event.name"], time_ns, utc_day(time_ns), entry["gen_ai.agent.type"],
            session, turn, scope, provider, response_model or request_model, *tokens, _bound_num(cost),
            _bound_num(duration), tool, tool_status, error_type, http_status if isinstance(http_status, int) else "",
            detail, *git_labels(entry), *detail_labels(entry))


def detail_labels(entry: dict[str, Any]) -> tuple[Any, ...]:
    """Schema 6: the subagent an entry belongs to (``gen_ai.agent.id`` of a ``subagent`` scope), its tool call id,
    the parent tool call of a subagent, the digest of a tool's arguments and the size of its result in bytes
    (``''`` where absent; the last two only for tool entries)."""
    get = entry.get
    agent_id = _label(get("gen_ai.agent.id")) if get("gen_ai.agent.scope") == "subagent" else ""
    call_id, parent = _label(get("gen_ai.tool.call.id")), _label(get("gen_ai.subagent.parent_tool_call.id"))
    if get("event.name") not in _TOOL_EVENTS:
        return agent_id, call_id, parent, "", ""
    return agent_id, call_id, parent, _digest(entry), _result_bytes(entry)


_TOOL_EVENTS = frozenset(("tool.call", "tool.result"))


def _label(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _digest(entry: dict[str, Any]) -> str:
    digest = entry.get("gen_ai.tool.call.arguments.hmac")
    if isinstance(digest, str) and digest:
        return digest
    arguments = entry.get("gen_ai.tool.call.arguments")
    if arguments is None:
        return ""
    try:
        return hashlib.blake2b(content_bytes(arguments), digest_size=16).hexdigest()
    except TypeError:  # a value orjson cannot encode: no digest, the rest of the row stands
        return ""


def _result_bytes(entry: dict[str, Any]) -> int | str:
    length = entry.get("gen_ai.tool.call.result.length")
    if type(length) is int and 0 <= length < _INT64:  # SQLite's INTEGER: a larger number is no size
        return length
    result = entry.get("gen_ai.tool.call.result")
    if result is None or entry.get("event.name") != "tool.result":
        return ""
    try:
        return len(content_bytes(result))
    except TypeError:
        return ""


def git_labels(entry: dict[str, Any]) -> tuple[str, str, str]:
    """The entry's repository (its remote URL in one form, ``collector.util.git_url``, else its name), branch and
    working tree, ``''`` where absent. A URL the agent itself sent in another form is normalised too; one that is no
    repository address gives way to the name."""
    url, name = entry.get("vcs.repository.url.full"), entry.get("vcs.repository.name")
    repo = _repo_form(url) if isinstance(url, str) and url else None
    if not repo:
        repo = name if isinstance(name, str) else ""
    branch, worktree = entry.get("vcs.ref.head.name"), entry.get("git.worktree.path")
    return repo, branch if isinstance(branch, str) else "", worktree if isinstance(worktree, str) else ""


@functools.lru_cache(maxsize=1024)
def _repo_form(url: str) -> str | None:
    """``normalise`` (about 8 us a call) once per URL: a store's entries name a handful of repositories."""
    return normalise(url)


def _bound_num(value: Any) -> float | str:
    number = None if value is None else _as_num(value)
    return "" if number is None else number


def event_key(event_id: Any) -> int:
    """The unique key of an id, a signed 64-bit INTEGER: its first 16 hex digits (the ids the parsers make
    are hashes in hex), else 8 bytes of its BLAKE2b. Equal ids give equal keys; two ids with one key are
    told apart by ``UsageStore`` (``collided``)."""
    text = event_id if isinstance(event_id, str) else str(event_id)
    try:
        value = int(text[:16], 16)
    except ValueError:
        value = int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")
    return (value & _KEY_MASK) - _KEY_BIAS


def session_row(entry: dict[str, Any]) -> tuple[Any, ...] | None:
    """The session's row of one entry as it is bound (``''`` for NULL), or None without a session."""
    session = _text(entry, "gen_ai.session.id")
    if session is None:
        return None
    time_ns = int(entry["time_unix_nano"])
    status = _text(entry, "session.status") if entry["event.name"] == "session.status" else None
    model = _text(entry, "agent.model") or _text(entry, "gen_ai.response.model") or _text(entry, "gen_ai.request.model")
    project = _text(entry, "workspace.root") or _text(entry, "workspace.path")
    return (entry["gen_ai.agent.type"], session, project or "", model or "", time_ns, time_ns,
            status or "", time_ns if status else "")


def fold_sessions(rows: Iterable[tuple[Any, ...] | None]) -> list[tuple[Any, ...]]:
    """One row per session of a batch, folded in order by the rules of ``_SESSION_UPSERT`` (first project
    and model, earliest first, latest last, the status with the latest time, a later one on a tie), so one
    upsert per session gives what one per entry gave."""
    folded: dict[tuple[str, str], tuple[Any, ...]] = {}
    for row in rows:
        if row is None:
            continue
        key = (row[0], row[1])
        old = folded.get(key)
        if old is None:
            folded[key] = row
            continue
        newer = row[6] != "" and row[7] >= (old[7] or 0)
        folded[key] = (key[0], key[1], old[2] or row[2], old[3] or row[3], min(old[4], row[4]), max(old[5], row[5]),
                       row[6] if newer else old[6], row[7] if newer else old[7])
    return list(folded.values())
