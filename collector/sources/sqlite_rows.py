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
that was deleted and created anew is read from the start.

The agent's tables need not have an index on the watermark (some agents ship none), and we never add one
(we never write to the agent's database). So rows are found in *windows*: one query gives the rowids
(with watermark and key) of the next ``WINDOW_ROWS`` changed rows in order, a single pass over the
table's small columns with SQLite's bounded top-N sort; then the rows themselves are read ``batch_rows``
at a time by rowid (the table's own b-tree). One pass per window, not per page: the cost is linear in
the rows. The position of a row is its watermark as the window saw it; a row updated meanwhile is read
with its new content and again later (same ids). A ``WITHOUT ROWID`` table is read by its key instead.

A corrupt page (SQLITE_CORRUPT) costs only the rows it holds: the batch is read again row by row, the
next position from the watermark index, each row by its key; a row that cannot be read is skipped and
counted (``stats.extra['corrupt_rows']``). The database file and its ``-wal``/``-shm`` must be regular
files (a FIFO would block the open forever); anything else is refused and counted (``refused_files``).

A read whose database and ``-wal`` have the inode, size and mtime they had when the last read went to the
end runs no query (idle cost: two ``stat`` calls); it queries anyway every ``RECHECK_S``.

A table may name *related* rows of another table (``related``: the rows whose ``match`` column equals this
row's ``on`` column, optionally only those whose JSON ``column`` has given values at given paths, or this
row's value of a column: ``where_row``): they come with the row as one more column, a JSON array of their
``column`` values in the other table's key order, read in the same query as the row (a message with its
parts). A change to the related rows alone does not make the row read again: the row carries them as they
were when the row was read. ``when`` reads them only for rows whose own JSON column has given values (a
user message's text parts: an assistant's are not used). A related read that names a column the database
does not have (another version's schema) is left out, said once, and the rows are read without it.

A table may keep only the rows whose JSON column has given values at given paths (``only``: the ``part``
rows of type ``tool``, the only ones its parser makes entries of): the page query leaves the others out
(SQLite's JSON functions, no Python object per row), and the position moves past them all the same. A row
whose column is not JSON is read: its parser refuses it, so a torn row is quarantined and counted.

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
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from collector.definitions import AgentDefinition
from collector.definitions.schema import kind_schema
from collector.model.raw import RawRecord
from collector.registry import Plugin
from collector.sources.base import Item, Position, SourceStats
from collector.sources.context import BuildContext, SourceBuilder
from collector.sources.position_values import (
    REFUSED,
    kind_of,
    restored,
    same_kind_sql,
    saveable,
    usable_watermark,
)
from collector.sources.regular import NotRegular, check_regular

log = logging.getLogger(__name__)

BATCH_ROWS = 500
WINDOW_ROWS = 50_000  # changed rows located per pass over a table
SETTLED_NS = 2_000_000_000  # files older than this can be trusted to change their mtime on a write
RECHECK_S = 60.0  # an unchanged database is queried anyway this often (a write within one mtime tick)
STUCK_GRACE_S = 5.0  # beyond the busy timeout, a query is considered stuck
BUSY_TIMEOUT_S = 0.2  # short: we retry next cycle rather than wait on the agent
LOOKUP = "__agent_collector_lookup"  # the rowid (or key) a page is read by
ROW = "__agent_collector_row"  # the alias of the table a related subquery refers to
_PLAIN = frozenset({str, int, type(None)})  # the values a row's record can take as they are


@dataclass(frozen=True, slots=True)
class RelatedSpec:
    """Rows of ``table`` whose ``match`` equals this row's ``on``: their ``column`` as one JSON array ``name``
    (in ``table``'s ``key`` order), only those whose JSON ``column`` has the value at each path of ``where``
    and this row's value of the column each path of ``where_row`` names; with ``when``, only for the rows
    that have its values (NULL for the others)."""

    name: str
    table: str
    match: str
    on: str
    column: str
    key: str = "rowid"
    where: tuple[tuple[str, str | int | float | bool], ...] = ()
    where_row: tuple[tuple[str, str], ...] = ()  # (JSON path, this row's column): equal values only
    if_column: str = ""  # with ``if_where`` (``when``): read only for the rows whose JSON here has these
    if_where: tuple[tuple[str, str | int | float | bool], ...] = ()  # values (or is no JSON object); else NULL


@dataclass(frozen=True, slots=True)
class TableSpec:
    table: str
    watermark: str
    key: str
    columns: tuple[str, ...] = ()
    related: tuple[RelatedSpec, ...] = ()
    where_column: str = ""  # with ``where``: only rows whose JSON here has these values (or is not JSON)
    where: tuple[tuple[str, str | int | float | bool], ...] = ()

    def select_list(self) -> tuple[str, list[Any]]:
        """The selected columns (own and related) and the parameters the related subqueries take."""
        row = _quote(ROW)
        cols = [", ".join(f"{row}.{_quote(c)}" for c in self.columns) if self.columns else f"{row}.*"]
        params: list[Any] = []
        for rel in self.related:
            inner = (f"SELECT {_quote(rel.column)} AS v FROM {_quote(rel.table)} "
                     f"WHERE {_quote(rel.match)} = {row}.{_quote(rel.on)}")
            mine: list[Any] = []
            column = _quote(rel.column)  # a related row that is not JSON matches nothing (json_extract
            test = f" AND (CASE WHEN json_valid({column}) THEN json_extract({column}, ?) END) = "  # would fail
            for path, value in rel.where:  # the whole query: one torn row, a table unread)
                inner += test + "?"
                mine += [path, value]
            for path, own in rel.where_row:
                inner += test + f"{row}.{_quote(own)}"
                mine.append(path)
            inner += f" ORDER BY {_quote(rel.key) if rel.key != 'rowid' else 'rowid'}"
            subquery = f"(SELECT json_group_array(v) FROM ({inner}))"
            if rel.if_where:  # not read for the rows that ``when`` leaves out (its placeholders come first)
                skip, skip_params = _json_test(f"{row}.{_quote(rel.if_column)}", rel.if_where, negate=True)
                subquery, mine = f"CASE WHEN {skip} THEN NULL ELSE {subquery} END", skip_params + mine
            cols.append(f"{subquery} AS {_quote(rel.name)}")
            params += mine
        return ", ".join(cols), params

    def row_filter(self) -> tuple[str, list[Any]]:
        """The ``AND ...`` that keeps only the rows ``where`` asks for, and its parameters. A row whose
        column is not a JSON object is kept: its parser refuses it, so it is quarantined and counted."""
        if not self.where:
            return "", []
        test, params = _json_test(f"{_quote(ROW)}.{_quote(self.where_column)}", self.where)
        return f" AND {test}", params


def _json_test(column: str, where: tuple[tuple[str, Any], ...], negate: bool = False) -> tuple[str, list[Any]]:
    """SQL true when ``column`` has the value at each JSON path of ``where`` or is not a JSON object
    (``negate``: when it is a JSON object without them). CASE tries its branches in order: ``json_type``
    or ``json_extract`` of a torn row would fail the whole query."""
    tests = " AND ".join(f"json_extract({column}, ?) = ?" for _ in where)
    if negate:
        tests = f"NOT ({tests})"
    return (f"(CASE WHEN NOT json_valid({column}) THEN {int(not negate)} WHEN json_type({column}) <> 'object' "
            f"THEN {int(not negate)} ELSE {tests} END)", [x for pair in where for x in pair])


@dataclass(slots=True)
class Page:
    """Rows as read: ``(watermark, key, values)`` in the window's order, ``values`` in ``names``' order, or
    None for a row only the position moves past (gone, unreadable, or not one the table's ``where`` wants)."""

    names: tuple[str, ...]
    rows: list[tuple[Any, Any, tuple[Any, ...] | None]] = field(default_factory=list)


@dataclass(slots=True)
class TableState:
    wm: Any = None
    key: Any = None
    ino: int | None = None
    window: deque[tuple[Any, Any, Any]] = field(default_factory=deque)  # (lookup, wm, key) still to read
    drained: bool = False  # the last window reached the table's end
    version: int = -1  # PRAGMA data_version when it was found: another value means the agent wrote since
    odd: tuple[Any, Any] | None = None  # (wm, key) of the last row refused for its watermark (not a number)

    def as_value(self) -> dict[str, Any]:
        key = self.key
        value = {"wm": self.wm, "key": key if key.__class__ is str else saveable(key), "ino": self.ino}
        if self.odd is not None:
            value["odd"] = [saveable(self.odd[0]), saveable(self.odd[1])]
        return value

    @classmethod
    def of(cls, stored: dict[str, Any]) -> TableState:
        """The state a saved position gives (a watermark it cannot use: read from the start)."""
        wm, odd = restored(stored.get("wm")), stored.get("odd")
        ino = stored.get("ino")
        state = cls(wm if usable_watermark(wm) else None, restored(stored.get("key")),
                    ino if ino.__class__ is int else None)
        if isinstance(odd, list) and len(odd) == 2:
            state.odd = (restored(odd[0]), restored(odd[1]))
        return state


class BusyError(Exception):
    """The database stayed locked past the busy timeout."""


class SqliteRows:
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
        self.batch_rows = batch_rows
        self.window_rows = max(window_rows, batch_rows)
        self._lookup: dict[str, str] = {}  # table -> "rowid", or its key for a WITHOUT ROWID table
        self._usable: dict[str, TableSpec] = {}  # table -> its spec without related reads the schema cannot give
        self.busy_timeout_s = busy_timeout_s
        self.stats = SourceStats()
        self.stats.extra["busy"] = 0
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
                page = await asyncio.wait_for(asyncio.to_thread(self._fetch, conn, spec, state),
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
                if not _is_corrupt(exc):
                    self._error(f"{self.path}:{spec.table}: {exc}")
                    return
                state.window.clear()  # found again from where the salvage stops
                state.drained = False
                try:  # a corrupt page costs only the rows it holds
                    page = await asyncio.to_thread(self._salvage, conn, spec, state)
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

    def _salvage(self, conn: sqlite3.Connection, spec: TableSpec, state: TableState) -> Page:
        """Row by row past a corrupt page: the next position comes from the watermark index (which does not
        touch the table's pages), the row by its key; a row that cannot be read is a marker (no values),
        counted and skipped. Raises if even the positions cannot be read (no usable index)."""
        spec = self._usable.get(spec.table, spec)
        wm, key = _quote(spec.watermark), "rowid" if spec.key == "rowid" else _quote(spec.key)
        table, (cols, rel_params) = f"{_quote(spec.table)} AS {_quote(ROW)}", spec.select_list()
        where, where_params = spec.row_filter()
        page = Page(())
        at_wm, at_key = state.wm, state.key
        while len(page.rows) < self.batch_rows:
            if at_wm is None:
                nxt = conn.execute(f"SELECT {wm}, {key} FROM {table} WHERE {wm} IS NOT NULL "
                                   f"ORDER BY {wm}, {key} LIMIT 1").fetchone()
            else:
                nxt = conn.execute(f"SELECT {wm}, {key} FROM {table} WHERE {wm} > ? OR ({wm} = ? AND {key} > ?) "
                                   f"ORDER BY {wm}, {key} LIMIT 1", (at_wm, at_wm, at_key)).fetchone()
            if nxt is None:
                break
            at_wm, at_key = nxt[0], nxt[1]
            try:
                cursor = conn.execute(f"SELECT {cols} FROM {table} WHERE {_quote(ROW)}.{key} = ?{where}",
                                      (*rel_params, at_key, *where_params))
                page.names = _names(cursor)
                row = cursor.fetchone()
                page.rows.append((at_wm, at_key, row))  # None: gone meanwhile, or not one ``where`` wants
            except sqlite3.DatabaseError as exc:
                if not _is_corrupt(exc):
                    raise
                self.stats.extra["corrupt_rows"] = self.stats.extra.get("corrupt_rows", 0) + 1
                log.warning("%s:%s: row %r is on a corrupt page; skipped", self.path, spec.table, at_key)
                page.rows.append((at_wm, at_key, None))
        return page

    def _fetch(self, conn: sqlite3.Connection, spec: TableSpec, state: TableState) -> Page:
        """The next page of changed rows (no rows: none left this cycle)."""
        try:
            spec = self._usable_spec(conn, spec)
            if not state.window and (not state.drained or _data_version(conn) != state.version):
                self._find_window(conn, spec, state)  # more to find, or the agent wrote since the last window
            page = [state.window.popleft() for _ in range(min(self.batch_rows, len(state.window)))]
            try:
                return self._rows_of(conn, spec, page)
            except sqlite3.OperationalError as exc:
                if not _not_utf8(exc) or conn.text_factory is _lenient_text:
                    raise
            # a TEXT value that is not UTF-8 (a lone surrogate as Node's CESU bytes, say): this connection
            # decodes text with U+FFFD for the bad bytes from now on (slower, so only once it is needed)
            self.stats.extra["text_not_utf8"] = self.stats.extra.get("text_not_utf8", 0) + 1
            log.info("%s:%s: a text value is not UTF-8; read with U+FFFD in its place", self.path, spec.table)
            conn.text_factory = _lenient_text
            return self._rows_of(conn, spec, page)
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                raise BusyError(str(exc)) from exc
            raise

    def _find_window(self, conn: sqlite3.Connection, spec: TableSpec, state: TableState) -> None:
        """Locate the next ``window_rows`` changed rows: one pass over the table, a bounded sort."""
        wm, key = _quote(spec.watermark), "rowid" if spec.key == "rowid" else _quote(spec.key)
        lookup = self._lookup_column(conn, spec)
        sql = f"SELECT {lookup}, {wm}, {key} FROM {_quote(spec.table)}"
        params: tuple[Any, ...] = ()
        if state.wm is None:
            after = f"{wm} IS NOT NULL"  # a row without a watermark cannot be tracked: never read
        else:
            after = f"({wm} > ? OR ({wm} = ? AND {key} > ?))"
            params = (state.wm, state.wm, state.key)
        if state.odd is not None:  # a row was refused for its watermark: the numbers after the last number
            number = same_kind_sql(wm, state.wm)  # and the others after it
            after = f"({after} AND {number}) OR (NOT {number} AND ({wm} > ? OR ({wm} = ? AND {key} > ?)))"
            params += (state.odd[0], state.odd[0], state.odd[1])
        sql += f" WHERE {after}"
        sql += f" ORDER BY {wm}, {key} LIMIT {int(self.window_rows)}"
        state.version = _data_version(conn)
        found = conn.execute(sql, params).fetchall()
        state.window.extend(found)
        state.drained = len(found) < self.window_rows

    def _usable_spec(self, conn: sqlite3.Connection, spec: TableSpec) -> TableSpec:
        """``spec`` without the related reads that name a column the database does not have (another
        version's schema): its rows are read without that column, and this is said once, rather than
        every query of the table failing."""
        usable = self._usable.get(spec.table)
        if usable is None:
            keep = tuple(rel for rel in spec.related if _has(conn, spec.table, rel.on, *(c for _, c in rel.where_row),
                                                               *([rel.if_column] if rel.if_where else []))
                         and _has(conn, rel.table, rel.match, rel.column, rel.key))
            for rel in spec.related:
                if rel not in keep:
                    log.warning("%s: %s is read without %s: a column it needs is missing", self.path, spec.table,
                                rel.name)
            usable = self._usable[spec.table] = replace(spec, related=keep)
        return usable

    def _lookup_column(self, conn: sqlite3.Connection, spec: TableSpec) -> str:
        lookup = self._lookup.get(spec.table)
        if lookup is None:
            try:
                conn.execute(f"SELECT rowid FROM {_quote(spec.table)} LIMIT 0")
                lookup = "rowid"
            except sqlite3.OperationalError as exc:
                if _is_busy(exc):
                    raise
                lookup = _quote(spec.key)  # a WITHOUT ROWID table: its primary key
            self._lookup[spec.table] = lookup
        return lookup

    def _rows_of(self, conn: sqlite3.Connection, spec: TableSpec, page: list[tuple[Any, Any, Any]]) -> Page:
        """The rows of a page, by rowid, in the window's order, with the window's watermark and key. A row
        deleted meanwhile is gone, one that ``where`` does not want too; when the page's last row is one of
        them, a marker (no values) in its place moves the position past it."""
        if not page:
            return Page(())
        lookup = f"{_quote(ROW)}.{self._lookup[spec.table]}"
        cols, params = spec.select_list()
        where, where_params = spec.row_filter()
        marks = ",".join("?" * len(page))
        sql = (f"SELECT {cols}, {lookup} AS {LOOKUP} FROM {_quote(spec.table)} AS {_quote(ROW)} "
               f"WHERE {lookup} IN ({marks}){where}")
        cursor = conn.execute(sql, [*params, *(p[0] for p in page), *where_params])
        found = {values[-1]: values for values in cursor.fetchall()}  # the lookup is the last column
        out = Page(_names(cursor)[:-1])
        for ident, wm, key in page:
            values = found.get(ident)
            if values is not None:
                out.rows.append((wm, key, values))
        if not out.rows or out.rows[-1][:2] != page[-1][1:]:
            out.rows.append((page[-1][1], page[-1][2], None))
        return out

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


def _has(conn: sqlite3.Connection, table: str, *columns: str) -> bool:
    """``table`` has these columns (``rowid`` always), or cannot be told (missing: its query says so)."""
    found = {row[1] for row in conn.execute(f"PRAGMA table_info({_quote(table)})")}
    return not found or all(c == "rowid" or c in found for c in columns)


def _names(cursor: sqlite3.Cursor) -> tuple[str, ...]:
    return tuple(d[0] for d in cursor.description or ())


def _lenient_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _not_utf8(exc: sqlite3.OperationalError) -> bool:
    return "decode to UTF-8" in str(exc)


def _data_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("PRAGMA data_version").fetchone()
    return int(row[0]) if row else -1


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
    return "malformed" in str(exc).lower()


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def table_specs(tables: list[dict[str, Any]]) -> list[TableSpec]:
    """The ``tables`` of a definition's ``sqlite`` source."""
    return [
        TableSpec(t["table"], t["watermark"], t.get("key") or "rowid", tuple(t.get("columns") or ()),
                  tuple(_related(r) for r in t.get("related") or ()), *_only(t.get("only")))
        for t in tables
    ]


def _only(spec: dict[str, Any] | None) -> tuple[str, tuple[tuple[str, str | int | float | bool], ...]]:
    if not spec:
        return "", ()
    return spec["column"], _where(spec.get("where"))


def _where(spec: dict[str, Any] | None) -> tuple[tuple[str, str | int | float | bool], ...]:
    return tuple(sorted((str(path), value) for path, value in (spec or {}).items()))


def _build(spec: dict[str, Any], defn: AgentDefinition, ctx: BuildContext) -> SqliteRows:
    tables = table_specs(spec["tables"])
    name = f"{defn.id}:{spec['name']}"
    return SqliteRows(name, defn.id, str(ctx.paths.expand(spec["path"])), tables, ctx.positions)


def _related(spec: dict[str, Any]) -> RelatedSpec:
    return RelatedSpec(spec["as"], spec["table"], spec["match"], spec["on"], spec["column"],
                       spec.get("key") or "rowid", _where(spec.get("where")),
                       tuple(sorted((str(path), str(own)) for path, own in (spec.get("where_row") or {}).items())),
                       *_only(spec.get("when")))


PLUGIN: Plugin[SourceBuilder] = Plugin("sqlite", _build, kind_schema("source_sqlite"))
