"""Tail JSONL files matched by globs (and paths added at run time), with checkpointed positions.

Each file is a stream keyed by its path. The stored position holds the file's identity (device, inode,
first-line fingerprint), the byte offset after the last complete line, and whether an oversized line is
being skipped. On every read:

- same identity, size >= offset: continue at the offset;
- same inode but smaller than the offset, or another first line: truncated or rewritten, start at 0;
- another inode at the path: the file was rotated. The old file is looked for by inode next to it
  (renamed, e.g. ``x.jsonl.1``) and read to its end first; then the new file is read from 0.
Files are never held open between reads, so rotation and deletion never leak descriptors. A file read to
its end is not opened again until its size or mtime moves. The daemon ``narrow``s a read to the files
its file events named and a sweep (``collector.sources.base.Scope``, ``file_index.ScopedFiles``);
otherwise a read looks at every file the globs match (folders listed again only when they changed).
"""

from __future__ import annotations

import fnmatch
import logging
import os
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from orjson import JSONDecodeError as _JSONDecodeError
from orjson import loads as _loads

from collector.model.boundary import strict_json_fits
from collector.model.decode import loads
from collector.model.raw import RawRecord
from collector.sources.base import Item, Position, Scope, SourceStats
from collector.sources.file_identity import FileIdentity, identify, tail_digest
from collector.sources.file_index import ScopedFiles
from collector.sources.line_filter import LineFilter
from collector.sources.line_reader import LineCursor, iter_lines
from collector.util.regular import NotRegular, open_regular

log = logging.getLogger(__name__)

DEFAULT_MAX_LINE = 16 * 1024 * 1024
READ_BUDGET = 8 * 1024 * 1024  # bytes per file per read() before yielding to other files
TAIL_BYTES = 256  # the end of the last line read, kept in the position as a second fingerprint
REFUSED_REMEMBERED = 1024  # refused hook-named paths remembered (not logged again) at once

AgentOf = Callable[[str, dict[str, Any]], str]
# A line's bytes -> (its data, or None to skip it; the name of a counter to bump, or None). Raises
# ValueError (orjson's error is one) for a malformed line.
Decoded = tuple[Any, str | None]
LineDecoder = Callable[[bytes], Decoded]


def decode_json_line(line: bytes) -> Decoded:
    """A BOM is skipped and lone UTF-16 surrogates become U+FFFD (``collector.model.decode``)."""
    return loads(line), None


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
        skip: LineFilter | None = None,
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
        self._plain = decode is decode_json_line  # lines orjson reads inline, the rest by _record
        self._skips = skip.skips if skip is not None else None  # lines that cannot make an entry, undecoded
        self._rotated: list[tuple[str, dict[str, Any]]] = []
        self._lag: dict[str, int] = {}  # path -> bytes written but not yet read (a partial last line)
        self._lag_total = 0  # their sum, kept as they change
        self._refused: set[str] = set()  # paths that are not regular files, logged once
        self._outside: OrderedDict[str, None] = OrderedDict()  # hook-named paths refused lately, logged once
        self._unreadable: set[str] = set()  # folders a glob could not list
        self._inside_checked: set[str] = set()  # paths known to stay inside the globs
        self._quiet: dict[str, tuple[tuple[int, int, int, int], int]] = {}  # path -> (stat, offset) at its end
        self._scope: Scope | None = None  # what the next read looks at (None: every file)
        self._added: set[str] = set()  # hook-named paths not read yet
        self.stats.extra["lag_bytes"] = 0
        prefix = self.stream_prefix
        self._positions = {k[len(prefix) :]: v for k, v in positions.items() if k.startswith(prefix)}
        self.extra_paths.update(p for p, v in self._positions.items() if v.get("extra"))
        self._files = ScopedFiles(self.globs, self.watch_paths())

    @property
    def stream_prefix(self) -> str:
        return f"{self.name}:"

    def add_path(self, path: str) -> bool:
        """Follow a file found some other way (e.g. a hook's transcript_path) only if the whole path, with
        ``..`` and symlinks resolved, fits one of our globs: a hook names any path it likes, and we read
        nothing outside the agent's own folders. True if new."""
        if path in self.extra_paths or path in self._positions:
            return False
        if path in self._outside:  # every hook of a session names its transcript: logged once, counted
            self._outside.move_to_end(path)
            self.stats.extra["refused_path_repeats"] = self.stats.extra.get("refused_path_repeats", 0) + 1
            return False
        if not self.covers(path):
            self._outside[path] = None
            if len(self._outside) > REFUSED_REMEMBERED:
                self._outside.popitem(last=False)
            self.stats.extra["refused_paths"] = self.stats.extra.get("refused_paths", 0) + 1
            log.warning("%s: %s is outside the agent's folders (%s); not followed (hooks naming it again "
                        "are counted as refused_path_repeats, not logged)", self.name, path, ", ".join(self.globs))
            return False
        self.extra_paths.add(path)
        self._added.add(path)
        return True

    def covers(self, path: str) -> bool:
        """``path`` (symlinks and ``..`` resolved) is one our globs match (or would, their folders resolved)."""
        real = os.path.realpath(path)
        return any(_glob_match(real, pattern) or _glob_match(real, os.path.realpath(pattern))
                   for pattern in self.globs)

    def watch_paths(self) -> list[str]:
        dirs = set()
        for pattern in self.globs:
            static = pattern.split("*", 1)[0]
            dirs.add(static if static.endswith("/") else os.path.dirname(static))
        dirs.update(os.path.dirname(p) for p in self.extra_paths)
        return sorted(d.rstrip("/") or "/" for d in dirs)

    def files(self) -> list[str]:
        """Every file: the globs' (folders listed again only when they changed) and the hook-named ones."""
        files = self._files.sorted_files(self.extra_paths, self._inside)
        self._count_unreadable_dirs()
        return files

    def narrow(self, scope: Scope | None) -> None:
        """The next ``read`` looks at ``scope`` only (``collector.sources.base.Scope``); None: every file."""
        self._scope = scope

    def _to_read(self) -> list[str]:
        scope, self._scope = self._scope, None
        added, self._added = self._added, set()
        if scope is None or scope.sweep >= 1.0:
            return self.files()
        picked = self._files.pick(scope, self.files, self._wants, lambda p: p not in self._quiet)
        return sorted(added.union(picked)) if added else picked

    def _wants(self, path: str) -> bool:
        return (path in self.extra_paths or self._files.index.matches(path)) and self._inside(path)

    def _inside(self, path: str) -> bool:
        """A symlink among the agent's files is followed only to a file our globs cover (checked once)."""
        if path in self._inside_checked:
            return True
        if os.path.islink(path) and not self.covers(path):
            if path not in self._refused:
                self._refused.add(path)
                self.stats.extra["refused_paths"] = self.stats.extra.get("refused_paths", 0) + 1
                self.stats.last_error = f"{path}: links to {os.path.realpath(path)}, outside the agent's folders"
                log.warning("%s: %s; not read", self.name, self.stats.last_error)
            return False
        self._inside_checked.add(path)
        return True

    def _count_unreadable_dirs(self) -> None:
        """A folder we cannot list hides its files; count (and log once) the ones we miss."""
        unreadable = set(self._files.index.unreadable)
        for folder in unreadable - self._unreadable:
            log.warning("%s: cannot read the folder %s; its files are not collected", self.name, folder)
        self._unreadable = unreadable
        self.stats.extra["unreadable_dirs"] = len(unreadable)

    def forget(self, streams: Iterable[str]) -> None:
        """Drop what we know of files retention deleted (their checkpoint streams): a new file at the same
        name is a new file, not a rotation of the deleted one."""
        for stream in streams:
            if stream.startswith(self.stream_prefix):
                path = stream[len(self.stream_prefix):]
                self._positions.pop(path, None)
                self._quiet.pop(path, None)
                self._lag.pop(path, None)

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
        quiet, positions = self._quiet, self._positions
        for path in self._to_read():
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                self._error(f"{path}: {exc.strerror}")
                continue
            known = quiet.get(path)  # nothing changed since it was read to its end: no open, no read (the
            if known is not None and known == (_stat_key(st), (positions.get(path) or {}).get("offset")):
                continue  # idle sweep's cost, a stat per file: checked here, no generator made for it)
            for item in self._read_path(path, st):
                yield item

    def _read_path(self, path: str, st: os.stat_result) -> Iterable[Item]:
        try:
            fd = open_regular(path)
        except FileNotFoundError:
            return
        except NotRegular as exc:
            self._refuse(path, exc)
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
            if (stored["fp"] != ident.fingerprint or os.fstat(fd).st_size < stored["offset"]
                    or not _same_tail(fd, stored)):
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
        stream = self.stream_prefix + path
        meta = {"path": path}  # one for the file's records: records are not changed once made
        fp, plain, stats, extra = ident.fingerprint, self._plain, self.stats, path in self.extra_paths
        skips = self._skips
        last: Position | None = None
        while True:
            before = cursor.offset
            for line, start in iter_lines(fd, cursor, self.max_line, READ_BUDGET):
                if line is None:
                    last = self._position(path, ident, cursor)
                    yield self._record(path, ident, line, start, observed), last
                    continue
                last = _LinePosition(stream, ident, cursor.offset, line, extra)
                stats.bytes += len(line) + 1
                if skips is not None and skips(line):
                    yield None, last
                    continue
                try:  # orjson at once; what it refuses or is not an object goes the careful way
                    data = _loads(line) if plain else None
                except _JSONDecodeError:
                    data = None
                if data.__class__ is not dict:
                    yield self._record(path, ident, line, start, observed), last
                    continue
                yield self._made(path, data, fp, start, observed, meta), last
            if cursor.offset == before:
                break
        self._positions[path] = (last or self._position(path, ident, cursor)).value
        st = os.fstat(fd)
        lag = max(0, st.st_size - cursor.offset)
        self._lag_total += lag - self._lag.get(path, 0)  # kept as it changes: no sum over every file
        self._lag[path] = lag
        self._quiet[path] = (_stat_key(st), cursor.offset)
        self.stats.extra["lag_bytes"] = self._lag_total

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
                    item_pos = self._position(path, ident, cursor)
                    yield self._record(old_path, ident, line, start, observed), item_pos
            finally:
                os.close(fd)
        self._rotated = []

    def _position(self, path: str, ident: FileIdentity, cursor: LineCursor) -> Position:
        """The position where no line just ended (a skipped line, the end of a read): the tail digest of
        the saved position is kept when the offset has not moved (``_LinePosition`` after a line)."""
        value = _position_value(ident, cursor.offset, cursor.skipping)
        if path in self._positions and self._positions[path].get("offset") == cursor.offset:
            value.update({k: v for k, v in self._positions[path].items() if k in ("tail", "tail_len")})
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
        return self._made(path, data, ident.fingerprint, start, observed, {"path": path})

    def _made(self, path: str, data: dict[str, Any], fp: str, start: int, observed: int,
              meta: dict[str, Any]) -> RawRecord:
        """The record of a line decoded to an object, checked at the boundary while it is fresh."""
        self.stats.records += 1
        agent = self._agent_of(path, data) if self._agent_of is not None else self.agent
        return RawRecord(agent, self.kind, data, fp, str(start), observed, meta, True,
                         data if strict_json_fits(data) else None)

    def _refuse(self, path: str, exc: NotRegular) -> None:
        """Counted every time, logged once per path: a FIFO or a device stays what it is."""
        self.stats.extra["refused_files"] = self.stats.extra.get("refused_files", 0) + 1
        if path not in self._refused:
            self._refused.add(path)
            self.stats.last_error = str(exc)
            log.warning("%s", exc)

    def _error(self, message: str) -> None:
        self.stats.errors += 1
        self.stats.last_error = message
        log.warning("%s", message)


class _LinePosition(Position):
    """The position after a complete line. Its value, with the digest of the line's last bytes, is made
    the first time it is read: a source yields a position per line, and only the last one of each
    stream in a batch is committed. The value is what ``_position_value`` and the tail make at once."""

    __slots__ = ("_state",)
    _state: tuple[FileIdentity, int, bytes, bool] | dict[str, Any]  # what it is made of, then the value

    def __init__(self, stream: str, ident: FileIdentity, offset: int, line: bytes, extra: bool) -> None:
        _SET_STREAM(self, stream)  # the slots' own setters: a frozen dataclass refuses plain assignment
        _SET_STATE(self, (ident, offset, line, extra))

    @property
    def value(self) -> dict[str, Any]:
        state = self._state
        if isinstance(state, dict):
            return state
        ident, offset, line, extra = state
        made = _position_value(ident, offset, False)
        end = line[1 - TAIL_BYTES:] + b"\n"  # the line is not copied whole for its last bytes
        made["tail"], made["tail_len"] = tail_digest(end), len(end)
        if extra:
            made["extra"] = True
        _SET_STATE(self, made)
        return made


_SET_STREAM = vars(Position)["stream"].__set__
_SET_STATE = vars(_LinePosition)["_state"].__set__


def _position_value(ident: FileIdentity, offset: int, skipping: bool) -> dict[str, Any]:
    return {"dev": ident.dev, "ino": ident.ino, "fp": ident.fingerprint, "offset": offset, "skipping": skipping}


def _stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _glob_match(path: str, pattern: str) -> bool:
    """``pattern`` matches all of ``path``, segment by segment (``*`` never crosses a ``/``)."""
    parts, wanted = path.split(os.sep), pattern.split(os.sep)
    return len(parts) == len(wanted) and all(fnmatch.fnmatchcase(p, w) for p, w in zip(parts, wanted, strict=True))


def _same_tail(fd: int, stored: dict[str, Any]) -> bool:
    """The bytes before the stored offset are still the line we read last (an in-place rewrite that keeps
    the first line and the size changes them)."""
    tail, size, offset = stored.get("tail"), int(stored.get("tail_len", 0)), int(stored.get("offset", 0))
    if not tail or size <= 0 or offset < size:
        return True
    return tail_digest(os.pread(fd, size, offset - size)) == tail
