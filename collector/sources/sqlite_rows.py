"""Poll tables of an agent's SQLite database, read-only, by a watermark column.

The database is opened with a ``file:...?mode=ro`` URI: read-only, but a normal reader of the WAL, so rows
the agent committed to ``-wal`` and not yet checkpointed are seen (``immutable=1`` would skip the WAL and
lock checks, and miss them). Every read opens a connection, runs short autocommit queries and closes it,
so the agent's writes and checkpoints are never held up by us for longer than one query. A query that
meets SQLITE_BUSY (a checkpoint or recovery holding the lock past the busy timeout) ends the cycle for
that table, is counted in ``stats.extra['busy']``, and is retried on the next cycle from the same place.

Each configured table is one stream. Rows are read in ``(watermark, key)`` order after the stored
position (``wm``, ``key``): a row that is updated later (a message gaining its tokens) gets a new
watermark and is read again; the parser gives each row's entries ids from the row's native id, so a
re-read row never duplicates an entry. The position also holds the database file's inode: a database
that was deleted and created anew is read from the start. How the rows are found and read a page at a
time, and what a corrupt page costs: :mod:`collector.sources.sqlite_pages`; what a table's spec asks
for (related rows, ``only``): :mod:`collector.sources.sqlite_specs`.

The database file and its ``-wal``/``-shm`` must be regular files (a FIFO would block the open forever);
anything else is refused and counted (``refused_files``).

A read whose database and ``-wal`` have the inode, size and mtime they had when the last read went to the
end runs no query (idle cost: two ``stat`` calls); it queries anyway every ``RECHECK_S``.

Yields ``RawRecord(kind="sqlite", data={"table": name, "row": {column: value}})``; its values are as
SQLite gives them (a blob as hex), within every bound of the pipeline's boundary by construction (64-bit
integers, UTF-8 text, two levels), so the record says so (``checked_data``) unless a float is infinite.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import sqlite3
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

from collector.definitions import AgentDefinition
from collector.definitions.schema import kind_schema
from collector.model.raw import RawRecord
from collector.registry import Plugin
from collector.sources.base import Item, Position, SourceStats
from collector.sources.context import BuildContext, SourceBuilder
from collector.sources.position_values import REFUSED, kind_of, usable_watermark
from collector.sources.sqlite_pages import BusyError, TablePages, TableState, is_corrupt
from collector.sources.sqlite_specs import TableSpec, table_specs
from collector.util.regular import NotRegular, check_regular

log = logging.getLogger(__name__)

BATCH_ROWS = 500
WINDOW_ROWS = 50_000  # changed rows located per pass over a table
SETTLED_NS = 2_000_000_000  # files older than this can be trusted to change their mtime on a write
RECHECK_S = 60.0  # an unchanged database is queried anyway this often (a write within one mtime tick)
STUCK_GRACE_S = 5.0  # beyond the busy timeout, a query is considered stuck
BUSY_TIMEOUT_S = 0.2  # short: we retry next cycle rather than wait on the agent
_PLAIN = frozenset({str, int, type(None)})  # the values a row's record can take as they are


class SqliteRows:
    """The ``sqlite`` source: one database, its configured tables each a stream (see module docstring)."""

    def __init__(
        self,
        name: str,
        agent: str,
        path: str,
        tables: list[TableSpec],
        positions: dict[str, dict[str, Any]],
        batch_rows: int = BATCH_ROWS,
        busy_timeout_s: float = BUSY_TIMEOUT_S,
        window_rows: int = WINDOW_ROWS,
    ) -> None:
        self.name = name
        self.agent = agent
        self.path = path
        self.tables = tables
        self.busy_timeout_s = busy_timeout_s
        self.stats = SourceStats()
        self.stats.extra["busy"] = 0
        self._pages = TablePages(path, self.stats, batch_rows, max(window_rows, batch_rows))
        self._stuck = False
        self._read_at: tuple[int, ...] | None = None  # the files' stat when a read last went to the end
        self._queried_at = 0.0
        self._state: dict[str, TableState] = {}
        for spec in tables:
            stored = positions.get(self.stream(spec.table))
            self._state[spec.table] = TableState.of(stored if isinstance(stored, dict) else {})

    def stream(self, table: str) -> str:
        return f"{self.name}:{table}"

    def watch_paths(self) -> list[str]:
        return [os.path.dirname(self.path) or "."]

    async def read(self) -> AsyncIterator[Item]:
        try:
            ino = os.stat(self.path).st_ino
            for path in (self.path, self.path + "-wal", self.path + "-shm"):
                if path == self.path or os.path.lexists(path):
                    check_regular(path)  # SQLite would block forever opening a FIFO
        except FileNotFoundError:
            return  # the agent has not created its database yet
        except NotRegular as exc:
            self.stats.extra["refused_files"] = self.stats.extra.get("refused_files", 0) + 1
            if self.stats.last_error != str(exc):
                self.stats.last_error = str(exc)
                log.warning("%s", exc)
            return
        except OSError as exc:
            self._error(f"{self.path}: {exc.strerror}")
            return
        stamp, stamped_ns = _stamp(self.path), time.time_ns()
        if stamp is not None and stamp == self._read_at and time.monotonic() - self._queried_at < RECHECK_S:
            return  # neither the database nor its -wal moved since a read found everything: no query
        try:
            conn = await asyncio.to_thread(self._connect)
        except sqlite3.Error as exc:
            self._error(f"{self.path}: cannot open read-only: {exc}")
            return
        self._stuck = False
        trouble = (self.stats.errors, self.stats.extra["busy"])
        try:
            for spec in self.tables:
                async for item in self._read_table(conn, spec, ino):
                    yield item
                if self._stuck:
                    break
        finally:
            if not self._stuck:  # a stuck query still owns the connection; it is dropped, not closed
                conn.close()
        if not self._stuck and trouble == (self.stats.errors, self.stats.extra["busy"]) and _settled(stamp, stamped_ns):
            self._read_at, self._queried_at = stamp, time.monotonic()  # read to the end it had then

    def _connect(self) -> sqlite3.Connection:
        uri = f"file:{urllib.parse.quote(self.path)}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=self.busy_timeout_s, check_same_thread=False,
                               isolation_level=None)
        return conn

    async def _read_table(self, conn: sqlite3.Connection, spec: TableSpec, ino: int) -> AsyncIterator[Item]:
        state = self._state[spec.table]
        if state.ino is not None and state.ino != ino:
            log.info("%s: database file replaced, reading %s from the start", self.path, spec.table)
            self._state[spec.table] = state = TableState()
        state.ino = ino
        state.window.clear()  # found anew each cycle
        state.drained = False
        stream = self.stream(spec.table)
        while True:
            try:
                page = await asyncio.wait_for(asyncio.to_thread(self._pages.fetch, conn, spec, state),
                                              self.busy_timeout_s + STUCK_GRACE_S)
            except TimeoutError:  # the busy timeout did not fire: never let one database stall the daemon
                conn.interrupt()
                self._stuck = True
                self.stats.extra["busy"] += 1
                log.warning("%s: %s did not answer in %.0fs; interrupted, read again next cycle", self.path,
                            spec.table, self.busy_timeout_s + STUCK_GRACE_S)
                return
            except BusyError:
                self.stats.extra["busy"] += 1
                log.info("%s: busy, %s will be read next cycle", self.path, spec.table)
                return
            except sqlite3.DatabaseError as exc:
                if not is_corrupt(exc):
                    self._error(f"{self.path}:{spec.table}: {exc}")
                    return
                state.window.clear()  # found again from where the salvage stops
                state.drained = False
                try:  # a corrupt page costs only the rows it holds
                    page = await asyncio.to_thread(self._pages.salvage, conn, spec, state)
                except sqlite3.Error as again:
                    self._error(f"{self.path}:{spec.table}: {again} (no way past the damage)")
                    return
            observed = time.time_ns()
            make = self._maker(spec, page.names, observed)
            for wm, key, values in page.rows:
                if usable_watermark(wm, state.wm):  # as each row is handed on: a consumer may stop at any row
                    state.wm, state.key = wm, key
                    yield (None if values is None else make(wm, key, values)), Position(stream, state.as_value())
                else:  # kept apart: a position there would pass every later numeric row by
                    state.odd = (wm, key)
                    record = None if values is None else self._refused(make(wm, key, values), spec, wm)
                    yield record, Position(stream, state.as_value())
            if not page.rows:
                return

    def _maker(self, spec: TableSpec, names: tuple[str, ...],
               observed: int) -> Callable[[Any, Any, tuple[Any, ...]], RawRecord]:
        """What makes a page's records: ``{"table": name, "row": {column: value}}``, with a blob as hex."""
        source_id, meta, stats = f"{self.path}:{spec.table}", {"path": self.path, "table": spec.table}, self.stats
        agent, table = self.agent, spec.table

        def make(wm: Any, key: Any, values: tuple[Any, ...]) -> RawRecord:
            stats.records += 1
            row = dict(zip(names, values, strict=False))  # a page's values end with its lookup column
            plain = _PLAIN.issuperset(map(type, values))
            if not plain:
                row = {k: (v.hex() if isinstance(v, bytes) else v) for k, v in row.items()}
                plain = all(math.isfinite(v) for v in row.values() if type(v) is float)
            data = {"table": table, "row": row}
            # SQLite's values are within every bound of the boundary (64-bit integers, UTF-8 text: no lone
            # surrogate; two levels, a value per column): the record needs no walk unless a float is infinite
            return RawRecord(agent, "sqlite", data, source_id, f"{wm}:{key}", observed, meta,
                             checked_data=data if plain else None)

        return make

    def _refused(self, record: RawRecord, spec: TableSpec, wm: Any) -> RawRecord:
        """The row as a record the boundary quarantines: its watermark cannot be a position."""
        self.stats.extra["refused_rows"] = self.stats.extra.get("refused_rows", 0) + 1
        reason = f"the {spec.table} row's watermark {spec.watermark} is {kind_of(wm)}, not a number"
        return replace(record, meta={**record.meta, REFUSED: reason})

    def _error(self, message: str) -> None:
        self.stats.errors += 1
        self.stats.last_error = message
        log.warning("%s", message)


def _stamp(path: str) -> tuple[int, ...] | None:
    """The database's and its -wal's inode, size and mtime: the agent's commits move one of them."""
    out: list[int] = []
    for name in (path, path + "-wal"):
        try:
            st = os.stat(name)
        except FileNotFoundError:
            out += [0, 0, 0]
            continue
        except OSError:
            return None
        out += [st.st_ino, st.st_size, st.st_mtime_ns]
    return tuple(out)


def _settled(stamp: tuple[int, ...] | None, at_ns: int) -> bool:
    """Both files had last changed well before their stat was taken: a later write shows a later mtime
    (one within the same clock tick as the stat might not)."""
    return stamp is not None and at_ns - max(stamp[2], stamp[5]) > SETTLED_NS


def _build(spec: dict[str, Any], defn: AgentDefinition, ctx: BuildContext) -> SqliteRows:
    tables = table_specs(spec["tables"])
    name = f"{defn.id}:{spec['name']}"
    return SqliteRows(name, defn.id, str(ctx.paths.expand(spec["path"])), tables, ctx.positions)


PLUGIN: Plugin[SourceBuilder] = Plugin("sqlite", _build, kind_schema("source_sqlite"))
