"""LoongSuite Pilot's correlation files, read (never written): the caller of an agent names the span each
of its prompts hangs under.

Pilot's format (``src/core/upstream-link/correlation-store.ts`` in github.com/alibaba/loongsuite-pilot):
one file per session, ``<dir>/<sessionId>.jsonl`` (``~/.loongsuite-pilot/acp-correlate/`` by default),
one JSON object a line, appended by the program that drives the agent (an ACP client or adapter) *before*
it sends a prompt:

- ``{"type": "turn", "sessionId", "contentHash", "contentPrefix", "traceparent"}``: the span of the turn
  whose user text has that hash (else starts with that prefix);
- ``{"type": "session", "traceparent"}``: the span of the session (Pilot writes it from the agent's
  ``TRACEPARENT`` and applies it to the first turn).

Pilot deletes the files after its TTL (24 h); we only read them. The directory is written by other
programs, so everything in it is hostile: the session id is checked before it becomes a file name; the
file is opened without following a symlink and read only if its descriptor is a regular file (as
``collector.util.regular`` does); at most ``MAX_FILE_BYTES`` of it and ``MAX_LINES`` lines are read; a
line that is not such a record (not JSON, another type, another session's ``sessionId``, a traceparent
that is not W3C's) is skipped and counted in ``problems`` (shown by ``status``). A file is read again
only when its modification time or size changed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import stat
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import orjson

from collector.pipeline.invocation import TraceParent, parse_traceparent
from collector.util.regular import read_all

log = logging.getLogger(__name__)

DEFAULT_DIR = "~/.loongsuite-pilot/acp-correlate"
MAX_FILE_BYTES = 1 << 20  # a file holds one short line per prompt of one session
MAX_LINES = 4096
MAX_LINE_BYTES = 16 * 1024
MAX_FIELD = 4096  # contentHash, contentPrefix: characters
FILES_CACHED = 256
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}\Z")  # no separator, no leading dot
_PROBLEM = "correlation file: "


@dataclass(frozen=True, slots=True)
class Record:
    """One usable line. ``ident``: the line's number and bytes hashed, what "consumed" remembers."""

    ident: str
    kind: str  # "turn" or "session"
    parent: TraceParent
    content_hash: str = ""  # lowercase
    content_prefix: str = ""


def file_name(session_id: object) -> str | None:
    """``<sessionId>.jsonl``, or None when the id could not be a plain file name of Pilot's."""
    if not isinstance(session_id, str) or not _SESSION_ID.match(session_id):
        return None
    return f"{session_id}.jsonl"


class CorrelationFiles:
    """The records of each session's file, cached while the file's (mtime, size, inode) stays the same."""

    def __init__(self, directory: Path, problems: dict[str, int] | None = None) -> None:
        self.directory = directory
        self.problems: dict[str, int] = problems if problems is not None else {}
        self._cache: OrderedDict[str, tuple[tuple[int, int, int], list[Record]]] = OrderedDict()

    def records(self, session_id: object) -> list[Record]:
        """The usable records of the session's file, in file order; [] without a usable file."""
        name = file_name(session_id)
        if name is None:
            if isinstance(session_id, str) and session_id:
                self._count("a session id that is not a plain file name, not looked up")
            return []
        path = self.directory / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            self._cache.pop(name, None)
            return []
        except OSError as exc:  # a symlink (O_NOFOLLOW), no permission, ...
            self._count(f"not readable ({exc.strerror or exc}), skipped")
            return []
        try:
            return self._read(name[: -len(".jsonl")], name, fd)
        finally:
            os.close(fd)

    def _read(self, session_id: str, name: str, fd: int) -> list[Record]:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            self._count("not a regular file, skipped")
            return []
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        cached = self._cache.get(name)
        if cached is not None and cached[0] == stamp:
            self._cache.move_to_end(name)
            return cached[1]
        if st.st_size > MAX_FILE_BYTES:
            self._count(f"over {MAX_FILE_BYTES} bytes, only its first {MAX_FILE_BYTES} read")
        records = self._parse(session_id, read_all(fd, MAX_FILE_BYTES))
        self._cache[name] = (stamp, records)
        while len(self._cache) > FILES_CACHED:
            self._cache.popitem(last=False)
        return records

    def _parse(self, session_id: str, data: bytes) -> list[Record]:
        lines = data.split(b"\n")
        if len(data) >= MAX_FILE_BYTES and lines:
            lines.pop()  # cut at the cap: the last line is not whole
        if len(lines) > MAX_LINES:
            self._count(f"over {MAX_LINES} lines, the rest not read")
            del lines[MAX_LINES:]
        out = []
        for number, line in enumerate(lines):
            if not line.strip():
                continue
            record = self._record(session_id, number, line)
            if record is not None:
                out.append(record)
        return out

    def _record(self, session_id: str, number: int, line: bytes) -> Record | None:
        if len(line) > MAX_LINE_BYTES:
            self._skip(f"a line over {MAX_LINE_BYTES} bytes")
            return None
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError:
            self._skip("a line that is not JSON")
            return None
        if not isinstance(data, dict):
            self._skip("a line that is not a JSON object")
            return None
        kind = data.get("type")
        if kind not in ("turn", "session"):
            self._skip('a line whose type is not "turn" or "session"')
            return None
        parent = parse_traceparent(data.get("traceparent"))
        if parent is None:
            self._skip("a line whose traceparent is not a W3C traceparent")
            return None
        ident = hashlib.sha256(b"%d:" % number + line).hexdigest()[:32]
        named = data.get("sessionId", session_id)
        if named != session_id:
            self._skip("a line naming another session")
            return None
        if kind == "session":
            return Record(ident, kind, parent)
        content_hash, prefix = data.get("contentHash", ""), data.get("contentPrefix", "")
        if not isinstance(content_hash, str) or not isinstance(prefix, str) or max(
                len(content_hash), len(prefix)) > MAX_FIELD:
            self._skip(f"a turn line whose contentHash or contentPrefix is not a string of at most {MAX_FIELD}")
            return None
        if not content_hash and not prefix:
            self._skip("a turn line with neither contentHash nor contentPrefix")
            return None
        return Record(ident, kind, parent, content_hash.lower(), prefix)

    def _skip(self, what: str) -> None:
        self._count(f"{what}, skipped")

    def _count(self, reason: str) -> None:
        reason = _PROBLEM + reason
        if reason not in self.problems:
            log.warning("upstream trace linking: %s (counted in status)", reason)
        self.problems[reason] = self.problems.get(reason, 0) + 1
