"""What a ``sqlite`` source reads of a table: the table specs a definition gives, and the SQL they select
and filter rows with.

A table may name *related* rows of another table (``related``: the rows whose ``match`` column equals this
row's ``on`` column, optionally only those whose JSON ``column`` has given values at given paths, or this
row's value of a column: ``where_row``): they come with the row as one more column, a JSON array of their
``column`` values in the other table's key order, read in the same query as the row (a message with its
parts). A change to the related rows alone does not make the row read again: the row carries them as they
were when the row was read. ``when`` reads them only for rows whose own JSON column has given values (a
user message's text parts: an assistant's are not used).

A table may keep only the rows whose JSON column has given values at given paths (``only``: the ``part``
rows of type ``tool``, the only ones its parser makes entries of): the page query leaves the others out
(SQLite's JSON functions, no Python object per row), and the position moves past them all the same. A row
whose column is not JSON is read: its parser refuses it, so a torn row is quarantined and counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ROW = "__agent_collector_row"  # the alias of the table a related subquery refers to


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
    """One table a source reads, by ``watermark`` then ``key``: its ``columns`` (none: all), the related
    rows that come with each row, and (``where_column``, ``where``) the rows it keeps (``only``)."""

    table: str
    watermark: str
    key: str
    columns: tuple[str, ...] = ()
    related: tuple[RelatedSpec, ...] = ()
    where_column: str = ""  # with ``where``: only rows whose JSON here has these values (or is not JSON)
    where: tuple[tuple[str, str | int | float | bool], ...] = ()

    def select_list(self) -> tuple[str, list[Any]]:
        """The selected columns (own and related) and the parameters the related subqueries take."""
        row = quote(ROW)
        cols = [", ".join(f"{row}.{quote(c)}" for c in self.columns) if self.columns else f"{row}.*"]
        params: list[Any] = []
        for rel in self.related:
            inner = (f"SELECT {quote(rel.column)} AS v FROM {quote(rel.table)} "
                     f"WHERE {quote(rel.match)} = {row}.{quote(rel.on)}")
            mine: list[Any] = []
            column = quote(rel.column)  # a related row that is not JSON matches nothing (json_extract
            test = f" AND (CASE WHEN json_valid({column}) THEN json_extract({column}, ?) END) = "  # would fail
            for path, value in rel.where:  # the whole query: one torn row, a table unread)
                inner += test + "?"
                mine += [path, value]
            for path, own in rel.where_row:
                inner += test + f"{row}.{quote(own)}"
                mine.append(path)
            inner += f" ORDER BY {quote(rel.key) if rel.key != 'rowid' else 'rowid'}"
            subquery = f"(SELECT json_group_array(v) FROM ({inner}))"
            if rel.if_where:  # not read for the rows that ``when`` leaves out (its placeholders come first)
                skip, skip_params = _json_test(f"{row}.{quote(rel.if_column)}", rel.if_where, negate=True)
                subquery, mine = f"CASE WHEN {skip} THEN NULL ELSE {subquery} END", skip_params + mine
            cols.append(f"{subquery} AS {quote(rel.name)}")
            params += mine
        return ", ".join(cols), params

    def row_filter(self) -> tuple[str, list[Any]]:
        """The ``AND ...`` that keeps only the rows ``where`` asks for, and its parameters. A row whose
        column is not a JSON object is kept: its parser refuses it, so it is quarantined and counted."""
        if not self.where:
            return "", []
        test, params = _json_test(f"{quote(ROW)}.{quote(self.where_column)}", self.where)
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


def quote(identifier: str) -> str:
    """``identifier`` as an SQL identifier (double quotes, doubled inside)."""
    return '"' + identifier.replace('"', '""') + '"'


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


def _related(spec: dict[str, Any]) -> RelatedSpec:
    return RelatedSpec(spec["as"], spec["table"], spec["match"], spec["on"], spec["column"],
                       spec.get("key") or "rowid", _where(spec.get("where")),
                       tuple(sorted((str(path), str(own)) for path, own in (spec.get("where_row") or {}).items())),
                       *_only(spec.get("when")))
