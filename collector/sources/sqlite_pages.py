"""Read a table of an agent's SQLite database a page at a time, in ``(watermark, key)`` order.

The agent's tables need not have an index on the watermark (some agents ship none), and we never add one
(we never write to the agent's database). So rows are found in *windows*: one query gives the rowids
(with watermark and key) of the next ``window_rows`` changed rows in order, a single pass over the
table's small columns with SQLite's bounded top-N sort; then the rows themselves are read ``batch_rows``
at a time by rowid (the table's own b-tree). One pass per window, not per page: the cost is linear in
the rows. The position of a row is its watermark as the window saw it; a row updated meanwhile is read
with its new content and again later (same ids). A ``WITHOUT ROWID`` table is read by its key instead.

A corrupt page (SQLITE_CORRUPT) costs only the rows it holds: the batch is read again row by row, the
next position from the watermark index, each row by its key; a row that cannot be read is skipped and
counted (``stats.extra['corrupt_rows']``). A related read that names a column the database does not have
(another version's schema) is left out, said once, and the rows are read without it.

Everything here runs in a worker thread, on the connection the source opened for the cycle.
"""

from __future__ import annotations

import logging
import sqlite3
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from collector.sources.base import SourceStats
from collector.sources.position_values import restored, same_kind_sql, saveable, usable_watermark
from collector.sources.sqlite_specs import ROW, TableSpec, quote

log = logging.getLogger("collector.sources.sqlite_rows")  # the source's log, as it always was

LOOKUP = "__agent_collector_lookup"  # the rowid (or key) a page is read by


@dataclass(slots=True)
class Page:
    """Rows as read: ``(watermark, key, values)`` in the window's order, ``values`` in ``names``' order, or
    None for a row only the position moves past (gone, unreadable, or not one the table's ``where`` wants)."""

    names: tuple[str, ...]
    rows: list[tuple[Any, Any, tuple[Any, ...] | None]] = field(default_factory=list)


@dataclass(slots=True)
class TableState:
    """Where the reading of one table stands: the position after the last row handed on, and this cycle's
    window of rows still to read."""

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


class TablePages:
    """The pages of one database's tables: the windows of changed rows, and the rows by rowid (or key)."""

    def __init__(self, path: str, stats: SourceStats, batch_rows: int, window_rows: int) -> None:
        self.path = path
        self.stats = stats
        self.batch_rows = batch_rows
        self.window_rows = window_rows
        self._lookup: dict[str, str] = {}  # table -> "rowid", or its key for a WITHOUT ROWID table
        self._usable: dict[str, TableSpec] = {}  # table -> its spec without related reads the schema cannot give

    def fetch(self, conn: sqlite3.Connection, spec: TableSpec, state: TableState) -> Page:
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

    def salvage(self, conn: sqlite3.Connection, spec: TableSpec, state: TableState) -> Page:
        """Row by row past a corrupt page: the next position comes from the watermark index (which does not
        touch the table's pages), the row by its key; a row that cannot be read is a marker (no values),
        counted and skipped. Raises if even the positions cannot be read (no usable index)."""
        spec = self._usable.get(spec.table, spec)
        wm, key = quote(spec.watermark), "rowid" if spec.key == "rowid" else quote(spec.key)
        table, (cols, rel_params) = f"{quote(spec.table)} AS {quote(ROW)}", spec.select_list()
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
                cursor = conn.execute(f"SELECT {cols} FROM {table} WHERE {quote(ROW)}.{key} = ?{where}",
                                      (*rel_params, at_key, *where_params))
                page.names = _names(cursor)
                row = cursor.fetchone()
                page.rows.append((at_wm, at_key, row))  # None: gone meanwhile, or not one ``where`` wants
            except sqlite3.DatabaseError as exc:
                if not is_corrupt(exc):
                    raise
                self.stats.extra["corrupt_rows"] = self.stats.extra.get("corrupt_rows", 0) + 1
                log.warning("%s:%s: row %r is on a corrupt page; skipped", self.path, spec.table, at_key)
                page.rows.append((at_wm, at_key, None))
        return page

    def _find_window(self, conn: sqlite3.Connection, spec: TableSpec, state: TableState) -> None:
        """Locate the next ``window_rows`` changed rows: one pass over the table, a bounded sort."""
        wm, key = quote(spec.watermark), "rowid" if spec.key == "rowid" else quote(spec.key)
        lookup = self._lookup_column(conn, spec)
        sql = f"SELECT {lookup}, {wm}, {key} FROM {quote(spec.table)}"
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
                conn.execute(f"SELECT rowid FROM {quote(spec.table)} LIMIT 0")
                lookup = "rowid"
            except sqlite3.OperationalError as exc:
                if _is_busy(exc):
                    raise
                lookup = quote(spec.key)  # a WITHOUT ROWID table: its primary key
            self._lookup[spec.table] = lookup
        return lookup

    def _rows_of(self, conn: sqlite3.Connection, spec: TableSpec, page: list[tuple[Any, Any, Any]]) -> Page:
        """The rows of a page, by rowid, in the window's order, with the window's watermark and key. A row
        deleted meanwhile is gone, one that ``where`` does not want too; when the page's last row is one of
        them, a marker (no values) in its place moves the position past it."""
        if not page:
            return Page(())
        lookup = f"{quote(ROW)}.{self._lookup[spec.table]}"
        cols, params = spec.select_list()
        where, where_params = spec.row_filter()
        marks = ",".join("?" * len(page))
        sql = (f"SELECT {cols}, {lookup} AS {LOOKUP} FROM {quote(spec.table)} AS {quote(ROW)} "
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


def _has(conn: sqlite3.Connection, table: str, *columns: str) -> bool:
    """``table`` has these columns (``rowid`` always), or cannot be told (missing: its query says so)."""
    found = {row[1] for row in conn.execute(f"PRAGMA table_info({quote(table)})")}
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


def is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    """SQLITE_CORRUPT or SQLITE_NOTADB: a damaged page, which costs only the rows it holds."""
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
