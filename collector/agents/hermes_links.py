"""Hermes Agent: what its ``state.db`` rows do not carry, looked up beside them.

- Per-call tokens: ``state.db`` holds session totals only (``sessions``, ``session_model_usage``); each
  model call is one line of ``logs/agent.log`` (next to ``state.db``), tagged with the session id:
  ``API call #N: model=M provider=P in=<prompt tokens, cached included> out=<completion tokens>
  total=... latency=...s cache=<cached>/<prompt> (...%)``. ``api_calls`` reads them from the last
  ``MAX_LOG_BYTES`` of the log (and of ``agent.log.1`` before it, where Python's rotating handler moves
  it). A line is named by its own time stamp and call number, so a rotation or a resumed turn (which
  numbers its calls from 1 again) never renames a call.
- The turn of a message row: the session's latest ``user`` message at or before it, asked of the
  database read-only (``mode=ro``, a short busy timeout). Messages are appended with growing ids, so the
  answer for a row never changes; it is cached per state of the database file.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
import stat
from dataclasses import dataclass
from datetime import datetime

BUSY_TIMEOUT_S = 0.2
MAX_LOG_BYTES = 8 * 1024 * 1024
_CALL = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ \[(?P<session>[^\]\s]{1,200})\] "
    r"agent\.conversation_loop: API call #(?P<n>\d{1,9}): model=(?P<model>\S{1,400}) provider=(?P<provider>\S{1,200}) "
    r"in=(?P<input>\d{1,12}) out=(?P<output>\d{1,12}) total=\d{1,13} latency=\S{1,20} "
    r"cache=(?P<cached>\d{1,12})/\d{1,12}")


@dataclass(frozen=True, slots=True)
class ApiCall:
    """One ``API call #N`` line of ``agent.log``."""

    stamp: str  # the line's own time stamp, local time as written (``2026-12-01 22:49:11,219``)
    number: int
    model: str
    provider: str
    input_tokens: int  # prompt tokens, cached included
    output_tokens: int
    cached_tokens: int

    @property
    def native_id(self) -> str:
        return f"call:{self.stamp}:{self.number}"

    def time_ns(self) -> int | None:
        """The line's time (written in local time) as epoch nanoseconds."""
        try:
            moment = datetime.strptime(self.stamp, "%Y-%m-%d %H:%M:%S,%f")
            return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000
        except (ValueError, OverflowError, OSError):
            return None


def log_path(db_path: str) -> str:
    return os.path.join(os.path.dirname(db_path), "logs", "agent.log")


def api_calls(db_path: str, session: str) -> list[ApiCall]:
    """The model calls of ``session`` in the log beside ``db_path``, oldest first (none without a log)."""
    path = log_path(db_path)
    calls: dict[str, ApiCall] = {}
    for name in (path + ".1", path):
        for call in _calls_in(name, _stamp(name)):
            if call.session == session:
                calls.setdefault(call.call.native_id, call.call)
    return list(calls.values())


@dataclass(frozen=True, slots=True)
class _Tagged:
    session: str
    call: ApiCall


@functools.lru_cache(maxsize=8)
def _calls_in(path: str, stamp: tuple[int, ...]) -> tuple[_Tagged, ...]:
    """Every ``API call`` line of the last ``MAX_LOG_BYTES`` of ``path`` as it is at ``stamp``."""
    if stamp[0] < 0:
        return ()
    try:
        with open(path, "rb") as log:
            start = max(0, stamp[0] - MAX_LOG_BYTES)
            log.seek(start)
            text = log.read(MAX_LOG_BYTES).decode("utf-8", "replace")
    except OSError:
        return ()
    lines = text.splitlines()[1 if start else 0:]  # the first line of a tail may be cut
    out = []
    for line in lines:
        if "API call #" not in line:
            continue
        found = _CALL.match(line)
        if found:
            call = ApiCall(found["ts"], int(found["n"]), found["model"], found["provider"], int(found["input"]),
                           int(found["output"]), int(found["cached"]))
            out.append(_Tagged(found["session"], call))
    return tuple(out)


def turn_of(db_path: str, session: str, message_id: int) -> int | None:
    """The id of ``session``'s latest ``user`` message at or before ``message_id``."""
    return _turn_at(db_path, session, message_id, _db_stamp(db_path))


def turn_before(db_path: str, session: str, time_s: float) -> int | None:
    """The id of ``session``'s latest ``user`` message written at or before ``time_s`` (epoch seconds)."""
    return _turn_by_time(db_path, session, time_s, _db_stamp(db_path))


@functools.lru_cache(maxsize=4096)
def _turn_at(db_path: str, session: str, message_id: int, stamp: tuple[int, ...]) -> int | None:
    return _one(db_path, "SELECT MAX(id) FROM messages WHERE session_id = ? AND role = 'user' AND id <= ?",
                (session, message_id))


@functools.lru_cache(maxsize=4096)
def _turn_by_time(db_path: str, session: str, time_s: float, stamp: tuple[int, ...]) -> int | None:
    return _one(db_path, "SELECT MAX(id) FROM messages WHERE session_id = ? AND role = 'user' AND timestamp <= ?",
                (session, time_s))


def _one(db_path: str, sql: str, params: tuple[object, ...]) -> int | None:
    uri = "file:" + db_path.replace("?", "%3f").replace("#", "%23") + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S)
        try:
            row = con.execute(sql, params).fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    value = row[0] if row else None
    return value if isinstance(value, int) else None


def _stamp(path: str) -> tuple[int, ...]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1, -1)
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read forever
        return (-1, -1, -1)
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def _db_stamp(db_path: str) -> tuple[int, ...]:
    return _stamp(db_path) + _stamp(db_path + "-wal")
