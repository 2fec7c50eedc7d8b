"""Tail JSONL files matched by globs (and paths added at run time), with checkpointed positions.

Each file is a stream keyed by its path. The stored position holds the file's identity (device, inode,
first-line fingerprint), the byte offset after the last complete line, and whether an oversized line is
being skipped. On every read:

- same identity, size >= offset: continue at the offset;
- same inode but smaller than the offset, or another first line: truncated or rewritten, start at 0;
- another inode at the path: the file was rotated. The old file is looked for by inode next to it
  (renamed, e.g. ``x.jsonl.1``) and read to its end first; then the new file is read from 0.
Files are never held open between reads, so rotation and deletion never leak descriptors.
"""

from __future__ import annotations

import fnmatch
import glob
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import orjson

from collector.model.raw import RawRecord
from collector.sources.base import Item, Position, SourceStats
from collector.sources.file_identity import FileIdentity, identify
from collector.sources.line_reader import LineCursor, iter_lines

log = logging.getLogger(__name__)

DEFAULT_MAX_LINE = 16 * 1024 * 1024
READ_BUDGET = 8 * 1024 * 1024  # bytes per file per read() before yielding to other files

AgentOf = Callable[[str, dict[str, Any]], str]
# A line's bytes -> (its data, or None to skip it; the name of a counter to bump, or None). Raises
# ValueError (orjson's error is one) for a malformed line.
Decoded = tuple[Any, str | None]
LineDecoder = Callable[[bytes], Decoded]


def decode_json_line(line: bytes) -> Decoded:
    return orjson.loads(line), None


class JsonlFiles:
    """A source over many JSONL files. ``kind`` becomes RawRecord.kind (``hook`` or ``transcript``)."""

    def __init__(
        self,
        name: str,
        agent: str,
        kind: str,
        globs: Iterable[str],
        positions: dict[str, dict[str, Any]],
        max_line: int = DEFAULT_MAX_LINE,
        agent_of: AgentOf | None = None,
        decode: LineDecoder = decode_json_line,
    ) -> None:
        self.name = name
        self.agent = agent
        self.kind = kind
        self.globs = list(globs)
        self.extra_paths: set[str] = set()
        self.stats = SourceStats()
        self.max_line = max_line
        self._agent_of = agent_of
        self._decode = decode
        self._rotated: list[tuple[str, dict[str, Any]]] = []
        self._lag: dict[str, int] = {}  # path -> bytes written but not yet read (a partial last line)
        self.stats.extra["lag_bytes"] = 0
        prefix = self.stream_prefix
        self._positions = {k[len(prefix) :]: v for k, v in positions.items() if k.startswith(prefix)}
        self.extra_paths.update(p for p, v in self._positions.items() if v.get("extra"))

    @property
    def stream_prefix(self) -> str:
        return f"{self.name}:"

    def add_path(self, path: str) -> bool:
        """Follow a file found some other way (e.g. a hook's transcript_path) if its name fits one of our
        globs (a JSONL tailer must not follow an older agent's whole-file JSON). True if new."""
        if path in self.extra_paths or path in self._positions:
            return False
        if not any(fnmatch.fnmatch(os.path.basename(path), os.path.basename(g)) for g in self.globs):
            return False
        self.extra_paths.add(path)
        return True

    def watch_paths(self) -> list[str]:
        dirs = set()
        for pattern in self.globs:
            static = pattern.split("*", 1)[0]
            dirs.add(static if static.endswith("/") else os.path.dirname(static))
        dirs.update(os.path.dirname(p) for p in self.extra_paths)
        return sorted(d.rstrip("/") or "/" for d in dirs)

    def files(self) -> list[str]:
        found: set[str] = set(self.extra_paths)
        for pattern in self.globs:
            found.update(glob.glob(pattern))
        return sorted(found)

    def pending_bytes(self) -> int:
        """Bytes past the checkpoint in every file (all of a file we have no position for): the work left."""
        total = 0
        for path in self.files():
            try:
                st = os.stat(path)
            except OSError:
                continue
            stored = self._positions.get(path) or {}
            same = stored.get("dev") == st.st_dev and stored.get("ino") == st.st_ino
            offset = int(stored.get("offset", 0)) if same else 0
            total += st.st_size - offset if st.st_size >= offset else st.st_size  # shorter: read again
        return total

    async def read(self) -> AsyncIterator[Item]:
        for path in self.files():
            for item in self._read_path(path):
                yield item

    def _read_path(self, path: str) -> Iterable[Item]:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return
        except OSError as exc:
            self._error(f"{path}: {exc.strerror}")
            return
        try:
            ident = identify(fd)
            if ident is None:
                return  # no complete first line yet
            stored = self._positions.get(path)
            cursor = self._cursor_for(path, ident, stored, fd)
            yield from self._lines(path, fd, ident, cursor)
        finally:
            os.close(fd)

    def _cursor_for(self, path: str, ident: FileIdentity, stored: dict[str, Any] | None, fd: int) -> LineCursor:
        if not stored:
            self.stats.files += 1
            return LineCursor(0)
        if stored["dev"] == ident.dev and stored["ino"] == ident.ino:
            if stored["fp"] != ident.fingerprint or os.fstat(fd).st_size < stored["offset"]:
                self.stats.truncations += 1
                log.info("%s: truncated or rewritten, reading from the start", path)
                return LineCursor(0)
            return LineCursor(stored["offset"], stored.get("skipping", False))
        self.stats.rotations += 1
        self._finish_rotated(path, stored)
        return LineCursor(0)

    def _finish_rotated(self, path: str, stored: dict[str, Any]) -> None:
        """Read the rest of the file that used to be at ``path``, if it still exists nearby."""
        directory = os.path.dirname(path) or "."
        try:
            names = os.listdir(directory)
        except OSError:
            return
        for name in names:
            candidate = os.path.join(directory, name)
            try:
                st = os.stat(candidate)
            except OSError:
                continue
            if st.st_ino == stored["ino"] and st.st_dev == stored["dev"] and candidate != path:
                self._rotated.append((candidate, stored))
                return
        log.warning("%s: rotated; the previous file is gone, unread tail lost", path)

    def _lines(self, path: str, fd: int, ident: FileIdentity, cursor: LineCursor) -> Iterable[Item]:
        yield from self._drain_rotated(path)
        observed = time.time_ns()
        while True:
            before = cursor.offset
            for line, start in iter_lines(fd, cursor, self.max_line, READ_BUDGET):
                position = self._position(path, ident, cursor)
                self.stats.bytes += 0 if line is None else len(line) + 1
                yield self._record(path, ident, line, start, observed), position
            if cursor.offset == before:
                break
        self._positions[path] = self._position(path, ident, cursor).value
        self._lag[path] = max(0, os.fstat(fd).st_size - cursor.offset)
        self.stats.extra["lag_bytes"] = sum(self._lag.values())

    def _drain_rotated(self, path: str) -> Iterable[Item]:
        for old_path, stored in self._rotated:
            try:
                fd = os.open(old_path, os.O_RDONLY)
            except OSError:
                continue
            try:
                ident = FileIdentity(stored["dev"], stored["ino"], stored["fp"])
                cursor = LineCursor(stored["offset"], stored.get("skipping", False))
                observed = time.time_ns()
                for line, start in iter_lines(fd, cursor, self.max_line, 1 << 62):
                    item_pos = self._position(path, ident, cursor, rotated_to=True)
                    yield self._record(old_path, ident, line, start, observed), item_pos
            finally:
                os.close(fd)
        self._rotated = []

    def _position(self, path: str, ident: FileIdentity, cursor: LineCursor, rotated_to: bool = False) -> Position:
        value: dict[str, Any] = {
            "dev": ident.dev,
            "ino": ident.ino,
            "fp": ident.fingerprint,
            "offset": cursor.offset,
            "skipping": cursor.skipping,
        }
        if path in self.extra_paths:
            value["extra"] = True
        return Position(self.stream_prefix + path, value)

    def _record(
        self, path: str, ident: FileIdentity, line: bytes | None, start: int, observed: int
    ) -> RawRecord | None:
        if line is None:
            self.stats.oversized += 1
            log.warning("%s@%d: line longer than %d bytes skipped", path, start, self.max_line)
            return None
        if not line.strip():
            return None
        try:
            data, counter = self._decode(line)
        except ValueError as exc:
            self.stats.malformed += 1
            log.warning("%s@%d: malformed line skipped: %s", path, start, exc)
            return None
        if counter is not None:
            self.stats.extra[counter] = self.stats.extra.get(counter, 0) + 1
            log.warning("%s@%d: %s", path, start, counter)
        if data is None:
            return None
        if not isinstance(data, dict):
            self.stats.malformed += 1
            log.warning("%s@%d: line is not a JSON object, skipped", path, start)
            return None
        self.stats.records += 1
        agent = self._agent_of(path, data) if self._agent_of else self.agent
        return RawRecord(agent, self.kind, data, ident.fingerprint, str(start), observed, {"path": path})

    def _error(self, message: str) -> None:
        self.stats.errors += 1
        self.stats.last_error = message
        log.warning("%s", message)
