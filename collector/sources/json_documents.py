"""Whole-file JSON documents that the agent rewrites in place (one JSON per session, e.g. Gemini CLI's
older ``session-*.json`` checkpoints).

Each file matched by the globs is a stream keyed by its path. Its position is what we last saw of it:
``mtime_ns``, ``size`` and the SHA-256 of the content. A file whose mtime and size are unchanged is not
opened; one that changed is read whole and hashed, and only a new hash yields a record: the whole
document, with the hash as its position. The parser gives entries ids from the document's own ids, so
the messages a rewrite repeats are dropped by the pipeline's dedupe.

With ``items`` (the key of a top-level array, e.g. ``messages``) a changed document yields one
``json_item`` record per array element it did not yield before, ``{"item": <element>, "index": i,
"document": {<the keys named in header>}}``, instead of the whole document: a document the agent
rewrites whole after every message costs a parse, not a re-parse of every message. The position then
also holds how many elements were yielded and a digest of the last of them; when the element at that
index is no longer the same (the agent rewrote its history, e.g. a compaction), every element is
yielded again and the parser's native ids let the pipeline drop the repeats. A rewrite that adds no
element yields nothing.

A document that does not parse (the agent is half-way through a non-atomic rewrite) is counted as
malformed and skipped; it is read again when the file changes. Files larger than ``max_bytes`` are
counted as oversized and skipped.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

import orjson

from collector.definitions import AgentDefinition
from collector.definitions.schema import kind_schema
from collector.model.boundary import MAX_DEPTH, cut_below
from collector.model.decode import loads
from collector.model.raw import RawRecord
from collector.registry import Plugin
from collector.sources.base import Item, Position, Scope, SourceStats
from collector.sources.context import BuildContext, SourceBuilder
from collector.sources.file_index import ScopedFiles
from collector.util.regular import NotRegular, open_regular, read_all

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 64 * 1024 * 1024


class JsonDocuments:
    def __init__(
        self,
        name: str,
        agent: str,
        globs: Iterable[str],
        positions: dict[str, dict[str, Any]],
        max_bytes: int = DEFAULT_MAX_BYTES,
        items: str | None = None,
        header: Iterable[str] = (),
    ) -> None:
        self.name = name
        self.agent = agent
        self.globs = list(globs)
        self.max_bytes = max_bytes
        self.items = items
        self.header = tuple(header)
        self.stats = SourceStats()
        prefix = self.stream_prefix
        self._refused: set[str] = set()
        self._seen = {k[len(prefix) :]: v for k, v in positions.items() if k.startswith(prefix)}
        self._files = ScopedFiles(self.globs, self.watch_paths())
        self._scope: Scope | None = None

    @property
    def stream_prefix(self) -> str:
        return f"{self.name}:"

    def watch_paths(self) -> list[str]:
        dirs = set()
        for pattern in self.globs:
            static = pattern.split("*", 1)[0]
            dirs.add(static if static.endswith("/") else os.path.dirname(static))
        return sorted(d.rstrip("/") or "/" for d in dirs)

    def files(self) -> list[str]:
        return self._files.sorted_files()

    def narrow(self, scope: Scope | None) -> None:
        """The next ``read`` looks at ``scope`` only (``collector.sources.base.Scope``); None: every file."""
        self._scope = scope

    async def read(self) -> AsyncIterator[Item]:
        scope, self._scope = self._scope, None
        paths = self.files() if scope is None or scope.sweep >= 1.0 else \
            self._files.pick(scope, self.files, self._files.index.matches, lambda p: p not in self._seen)
        for path in paths:
            for item in self._read_path(path):
                yield item

    def _read_path(self, path: str) -> list[Item]:
        stored = self._seen.get(path)
        try:
            st = os.stat(path)
        except OSError:
            st = None  # opening it says why
        if stored and st and stored.get("mtime_ns") == st.st_mtime_ns and stored.get("size") == st.st_size:
            return []  # unchanged: not opened (the idle cost)
        try:
            fd = open_regular(path)
        except FileNotFoundError:
            return []
        except NotRegular as exc:
            self._refuse(path, exc)
            return []
        except OSError as exc:
            self._error(f"{path}: {exc.strerror}")
            return []
        try:
            item = self._read_open(path, fd)
        finally:
            os.close(fd)
        if item is None:
            return []
        record, position = item
        if self.items is None:
            return [item]
        if record is None:  # unchanged or skipped: how far the elements got stays
            kept: dict[str, Any] = {k: stored[k] for k in ("items", "last") if stored and k in stored}
            position = Position(position.stream, {**position.value, **kept})
            self._seen[path] = position.value
            return [(None, position)]
        return self._split(record, position, stored)

    def _read_open(self, path: str, fd: int) -> Item | None:
        st = os.fstat(fd)
        stored = self._seen.get(path)
        if stored and stored.get("mtime_ns") == st.st_mtime_ns and stored.get("size") == st.st_size:
            return None
        if stored is None:
            self.stats.files += 1
        if st.st_size > self.max_bytes:
            self.stats.oversized += 1
            log.warning("%s: %d bytes is over the %d byte limit, skipped", path, st.st_size, self.max_bytes)
            return None, self._remember(path, st, stored.get("sha256") if stored else None)
        try:
            content = read_all(fd, self.max_bytes + 1)
        except OSError as exc:
            self._error(f"{path}: {exc.strerror}")
            return None
        digest = hashlib.sha256(content).hexdigest()
        position = self._remember(path, st, digest)
        if stored and stored.get("sha256") == digest:
            return None, position  # touched, not changed
        return self._record(path, content, digest), position

    def _refuse(self, path: str, exc: NotRegular) -> None:
        self.stats.extra["refused_files"] = self.stats.extra.get("refused_files", 0) + 1
        if path not in self._refused:
            self._refused.add(path)
            self.stats.last_error = str(exc)
            log.warning("%s", exc)

    def _remember(self, path: str, st: os.stat_result, digest: str | None) -> Position:
        value = {"mtime_ns": st.st_mtime_ns, "size": st.st_size, "sha256": digest}
        self._seen[path] = value
        return Position(self.stream_prefix + path, value)

    def _record(self, path: str, content: bytes, digest: str) -> RawRecord | None:
        try:
            data = loads(content)
        except orjson.JSONDecodeError as exc:
            self.stats.malformed += 1
            log.warning("%s: not valid JSON (being rewritten?), skipped until it changes: %s", path, exc)
            return None
        if not isinstance(data, dict):
            self.stats.malformed += 1
            log.warning("%s: the document is not a JSON object, skipped", path)
            return None
        self.stats.records += 1
        self.stats.bytes += len(content)
        return RawRecord(self.agent, "json_file", data, path, digest, time.time_ns(), {"path": path})

    def _split(self, record: RawRecord, position: Position, stored: dict[str, Any] | None) -> list[Item]:
        """The elements of ``items`` not yielded before, one record each; the last carries the position of
        the whole document, the others one that says how far a restart has got."""
        elements = record.data.get(self.items or "")
        path, digest = record.source_id, record.position
        if not isinstance(elements, list):
            self.stats.malformed += 1
            log.warning("%s: %r is not a list, skipped until the file changes", path, self.items)
            return [(None, position)]
        start = _resume_index(elements, stored)
        document = {k: record.data[k] for k in self.header if k in record.data}
        out: list[Item] = []
        for index in range(start, len(elements)):
            data = {"item": elements[index], "index": index, "document": document}
            value = {"mtime_ns": None, "size": None, "sha256": None,
                     "items": index + 1, "last": _element_digest(elements[index])}
            item = RawRecord(self.agent, "json_item", data, path, f"{digest}:{index}", record.observed_ns,
                             {"path": path, "index": index})
            out.append((item, Position(position.stream, value)))
        self.stats.records += len(out) - 1
        last = {"items": len(elements), "last": _element_digest(elements[-1]) if elements else None}
        final = Position(position.stream, {**position.value, **last})
        self._seen[path] = final.value
        if not out:
            return [(None, final)]
        out[-1] = (out[-1][0], final)
        return out

    def _error(self, message: str) -> None:
        self.stats.errors += 1
        self.stats.last_error = message
        log.warning("%s", message)


def _element_digest(element: Any) -> str:
    try:
        text = orjson.dumps(element)
    except orjson.JSONEncodeError:  # nested deeper than orjson writes (or an odd value): judged cut at 64
        text = orjson.dumps(cut_below(element, MAX_DEPTH), default=repr) if isinstance(element, (dict, list)) \
            else repr(element).encode()
    return hashlib.sha256(text).hexdigest()[:32]


def _resume_index(elements: list[Any], stored: dict[str, Any] | None) -> int:
    """Where the new elements begin: after the ones yielded before, if the last of those is unchanged."""
    count = stored.get("items") if stored else None
    if not isinstance(count, int) or count <= 0 or count > len(elements):
        return 0
    return count if _element_digest(elements[count - 1]) == stored.get("last") else 0  # type: ignore[union-attr]


def _build(spec: dict[str, Any], defn: AgentDefinition, ctx: BuildContext) -> JsonDocuments:
    globs = [str(ctx.paths.expand(g)) for g in spec["globs"]]
    return JsonDocuments(f"{defn.id}:{spec['name']}", defn.id, globs, ctx.positions,
                         items=spec.get("items"), header=spec.get("header", ()))


PLUGIN: Plugin[SourceBuilder] = Plugin("json_file", _build, kind_schema("source_json_file"))

