"""The sqlite source pages by an index-friendly plan: one pass over the table per window of changed rows,
then the rows by rowid (or by primary key for a WITHOUT ROWID table); it never writes to the database."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from pathlib import Path

import pytest
from support.sqlite import SPEC, make_db, read, rows, traced

from collector.sources.sqlite_rows import SqliteRows


def plan(db: Path, sql: str) -> str:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return " / ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
    finally:
        conn.close()


def test_one_pass_per_window_and_pages_by_rowid(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    writer = make_db(db)
    writer.executemany("INSERT INTO item VALUES (?, ?, ?)", [(f"r{i:04}", (i * 7) % 1000, "x") for i in range(1000)])
    source = traced(db, SPEC, batch_rows=10, window_rows=300)
    got = rows(read(source))
    assert got == sorted(((f"r{i:04}", (i * 7) % 1000) for i in range(1000)), key=lambda r: (r[1], r[0]))
    windows = [s for s in source.statements if "ORDER BY" in s]
    pages = [s for s in source.statements if " IN (" in s]
    assert len(windows) == 4  # 1000 rows in windows of 300: three full, one short (the end)
    assert len(pages) == 100
    page_plan = plan(db, pages[0])
    assert "SCAN" not in page_plan and "TEMP B-TREE" not in page_plan, page_plan
    assert "INTEGER PRIMARY KEY" in page_plan or "rowid" in page_plan.lower(), page_plan
    assert read(source) == []  # nothing new: one window query finds nothing
    writer.close()


def test_a_without_rowid_table_is_paged_by_its_key(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("CREATE TABLE item (id TEXT PRIMARY KEY, updated INTEGER, body TEXT) WITHOUT ROWID")
    writer.executemany("INSERT INTO item VALUES (?, ?, ?)", [(f"r{i:03}", 100 - i, "x") for i in range(50)])
    source = traced(db, SPEC, batch_rows=7)
    assert rows(read(source)) == [(f"r{i:03}", 100 - i) for i in reversed(range(50))]
    page_plan = plan(db, next(s for s in source.statements if " IN (" in s))
    assert "SCAN" not in page_plan and "PRIMARY KEY" in page_plan, page_plan
    writer.close()


@pytest.mark.parametrize("wal", [True, False])
def test_reading_never_writes_to_the_database(tmp_path: Path, wal: bool) -> None:
    db = tmp_path / "a.db"
    writer = make_db(db, wal=wal)
    writer.executemany("INSERT INTO item VALUES (?, ?, ?)", [(f"r{i}", i, "x") for i in range(300)])
    files = [db, Path(f"{db}-wal")] if wal else [db]

    def digests() -> list[str]:
        return [hashlib.sha256(p.read_bytes()).hexdigest() for p in files]

    before = digests()
    assert len(rows(read(SqliteRows("s", "a", str(db), SPEC, {}, batch_rows=50, window_rows=120)))) == 300
    assert digests() == before
    writer.close()


def test_rows_updated_or_deleted_between_window_and_page(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    writer = make_db(db)
    writer.executemany("INSERT INTO item VALUES (?, ?, ?)", [(f"r{i}", i, "x") for i in range(10)])
    source = SqliteRows("s", "a", str(db), SPEC, {}, batch_rows=2)

    async def go() -> list[tuple[str, int]]:
        seen = []
        async for record, _ in source.read():
            if record is None:
                continue
            seen.append((record.data["row"]["id"], record.data["row"]["updated"]))
            if len(seen) == 1:
                writer.execute("UPDATE item SET updated = 50 WHERE id = 'r5'")
                writer.execute("DELETE FROM item WHERE id IN ('r6', 'r7')")
        return seen

    seen = asyncio.run(go())
    ids = [i for i, _ in seen]
    assert "r6" not in ids and "r7" not in ids
    assert ids[-1] == "r5" and seen[-1][1] == 50  # updated meanwhile: read again at its new watermark
    assert read(source) == []
    writer.close()
