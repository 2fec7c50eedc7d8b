"""The local usage store: every entry's numbers in one SQLite database under the data directory.

One row per entry (``events``, a rowid table appended in arrival order, unique by its id) with its time, UTC
day, agent, session, model, tokens, tool outcome, error class and git attribution (the repository's normalised
remote URL or name, the branch, the working tree's path: the pipeline's ``vcs.*``/``git.worktree.path``
fields, ``collector.pipeline.git_attributes``) and, for the detail reports, its subagent, tool call ids, the
digest of a tool's arguments and the size of its result (``collector.usage.rows``); one row per session
(``sessions``) with its project (the workspace path), model and last status, the models seen (``models``, for
the price lookup) and the rollup the reports read (``slots``, see ``collector.usage.rollup``); for the
dashboard, the sessions' rollup (``session_usage``, ``collector.usage.session_rollup``) and the search index of
the sessions' labels (``session_terms``, ``session_fts``, ``collector.usage.search_index``), and, only when
content capture put a prompt's text in its entry, the start of each session's first prompt (``session_titles``,
``collector.usage.titles``). Random ids land on random pages, so the id's key is kept apart (below); one index
(name, time) serves the dashboard. No completion or tool text is kept; an error's message and a session's first
prompt (its start) only when content capture put them in the entry.

Exactly once, like the JSONL file: a row is inserted only when its id's key is not held yet, committed
(WAL, ``synchronous=FULL``) inside ``export`` and so before the checkpoint that covers the batch; a batch
replayed after a crash inserts nothing twice. The key (``k``) is an INTEGER, 8 bytes of the id
(``event_key``). The keys of the last rows (above ``keys_upto`` in ``meta``, at most ``MERGE_AT``) are
held in memory and read back from ``events`` at open; every ``MERGE_AT`` rows they move into
``event_keys`` (key -> row id) in one sorted pass inside a batch's transaction: a unique index on random
keys cost a random page write per entry, more the larger the store grew. Two ids with one key (2**-64
for the hashes the parsers make, but any text is an id) are told apart exactly: the second is stored
with no key and its id in ``collided``, which is checked by the text. Rows older than ``retention_days``
are pruned once a day.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import collector.usage.corrections as corrections
import collector.usage.rollup as rollup
import collector.usage.search_index as search_index
import collector.usage.session_rollup as session_rollup
import collector.usage.titles as titles
from collector.usage.rows import DETAIL_COLUMNS, event_key, event_row, fold_sessions, git_labels, session_row, utc_day
from collector.util.private import create_private, private_dir

__all__ = ["DETAIL_COLUMNS", "GIT_COLUMNS", "SCHEMA_VERSION", "StoreSettings", "UsageStore", "connect", "event_key",
           "event_row", "fold_sessions", "git_labels", "session_row", "store_file", "utc_day"]

SCHEMA_VERSION = 6  # 2: ``events`` is a rowid table (appended in arrival order); 3: unique by an integer key;
# 4: the keys in ``event_keys``, merged in sorted passes; 5: repo, branch, worktree (added to older rows as NULL);
# 6: agent_id, call_id, parent_call, args_digest, result_bytes (``collector.usage.rows``; NULL in older rows)
FILE_NAME = "usage.sqlite"
PAGE_SIZE = 8192  # fewer, fuller pages per commit than SQLite's 4096
MERGE_AT = 32_768  # rows whose keys wait in memory before they move into ``event_keys`` in one sorted pass
CACHE_KIB = 8192  # SQLite's page cache (its default, 2 MiB, made a growing store re-read its pages)

_EVENTS = """
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY,
  k INTEGER,  -- event_key(event_id); NULL for an id another id's key holds (its id is in collided)
  event_id TEXT NOT NULL,
  name TEXT NOT NULL,
  time_ns INTEGER NOT NULL,
  day TEXT NOT NULL,
  agent TEXT NOT NULL,
  session TEXT,
  turn TEXT,
  scope TEXT,
  provider TEXT,
  model TEXT,
  input INTEGER NOT NULL DEFAULT 0,
  output INTEGER NOT NULL DEFAULT 0,
  cache_read INTEGER NOT NULL DEFAULT 0,
  cache_write INTEGER NOT NULL DEFAULT 0,
  reasoning INTEGER NOT NULL DEFAULT 0,
  agent_cost_usd REAL,
  duration_ms REAL,
  tool TEXT,
  tool_status TEXT,
  error_type TEXT,
  http_status INTEGER,
  detail TEXT,
  repo TEXT,
  branch TEXT,
  worktree TEXT,
  agent_id TEXT,
  call_id TEXT,
  parent_call TEXT,
  args_digest TEXT,
  result_bytes INTEGER
)"""
_COLLIDED = "CREATE TABLE IF NOT EXISTS collided (event_id TEXT PRIMARY KEY) WITHOUT ROWID"
_KEYS = "CREATE TABLE IF NOT EXISTS event_keys (k INTEGER PRIMARY KEY, id INTEGER NOT NULL)"
_META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
_SCHEMA = f"""{_EVENTS};
{_COLLIDED};
{_KEYS};
CREATE INDEX IF NOT EXISTS events_time ON events(name, time_ns);
CREATE TABLE IF NOT EXISTS sessions (
  agent TEXT NOT NULL,
  session TEXT NOT NULL,
  project TEXT,
  model TEXT,
  first_ns INTEGER NOT NULL,
  last_ns INTEGER NOT NULL,
  status TEXT,
  status_ns INTEGER,
  PRIMARY KEY (agent, session)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sessions_project ON sessions(project);
CREATE INDEX IF NOT EXISTS sessions_last ON sessions(last_ns);
CREATE TABLE IF NOT EXISTS models (model TEXT NOT NULL, provider TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (model, provider)) WITHOUT ROWID;
{_META};
"""

_COLUMNS = ("event_id", "name", "time_ns", "day", "agent", "session", "turn", "scope", "provider", "model",
            "input", "output", "cache_read", "cache_write", "reasoning", "agent_cost_usd", "duration_ms",
            "tool", "tool_status", "error_type", "http_status", "detail")
GIT_COLUMNS = ("repo", "branch", "worktree")  # schema 5; a store of 1..3 is copied by ``_COLUMNS``, then these added
_ADDED = GIT_COLUMNS + DETAIL_COLUMNS  # columns an older store gets by ALTER TABLE
# NULL is bound as '' and turned back by NULLIF (no label is '', no number is text): Python's sqlite3 binds a
# None through an adapter lookup that raises and clears two AttributeErrors, 180 ns each, where a str is
# bound at once; a row has a dozen.
_NOT_NULL = {"event_id", "name", "time_ns", "day", "agent", "input", "output", "cache_read", "cache_write", "reasoning"}
_UPDATED = _COLUMNS[1:] + _ADDED  # what a correction rewrites (event_row's values after its key and id)
_NULLABLE = frozenset(_UPDATED) - _NOT_NULL
_INSERT = (f"INSERT OR IGNORE INTO events(k,{','.join(_COLUMNS + _ADDED)}) VALUES(?,"
           + ",".join("?" if c in _NOT_NULL else "NULLIF(?, '')" for c in _COLUMNS + _ADDED) + ")")
_SESSION_UPSERT = """
INSERT INTO sessions(agent, session, project, model, first_ns, last_ns, status, status_ns)
VALUES(?, ?, NULLIF(?, ''), NULLIF(?, ''), ?, ?, NULLIF(?, ''), NULLIF(?, ''))
ON CONFLICT(agent, session) DO UPDATE SET
  project = COALESCE(sessions.project, excluded.project),
  model = COALESCE(sessions.model, excluded.model),
  first_ns = MIN(sessions.first_ns, excluded.first_ns),
  last_ns = MAX(sessions.last_ns, excluded.last_ns),
  status = CASE WHEN excluded.status IS NOT NULL AND excluded.status_ns >= COALESCE(sessions.status_ns, 0)
                THEN excluded.status ELSE sessions.status END,
  status_ns = CASE WHEN excluded.status IS NOT NULL AND excluded.status_ns >= COALESCE(sessions.status_ns, 0)
                THEN excluded.status_ns ELSE sessions.status_ns END
"""


@dataclass(frozen=True, slots=True)
class StoreSettings:
    enabled: bool = True
    path: Path | None = None
    retention_days: int = 0


def store_file(data_dir: Path, settings: StoreSettings | None = None) -> Path:
    if settings is not None and settings.path is not None:
        return settings.path
    return data_dir / FILE_NAME


def _day_start_slot(day: str) -> int:
    import calendar

    return calendar.timegm(time.strptime(day, "%Y-%m-%d")) * 10**9 // rollup.SLOT_NS


_OLD_INDEXES = ("events_day", "events_time", "events_session", "events_model")


def _migrate(db: sqlite3.Connection) -> None:
    """A store of schema 1 (``events`` keyed by its id, WITHOUT ROWID, four more indexes), 2 (a rowid table
    unique by the id's text) or 3 (unique by the key): its rows move into the table of schema 4 with their
    keys, in one transaction, in their order (the row ids of 2 and 3 kept, the rows of 1 oldest first),
    and the keys into ``event_keys`` (of two ids with one key the first keeps it)."""
    columns = [row[1] for row in db.execute("PRAGMA table_info(events)")]
    unique = any(row[2] for row in db.execute("PRAGMA index_list(events)"))
    keyed = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'event_keys'").fetchone() is not None
    if not columns or ("k" in columns and keyed and not unique):
        return
    names = ",".join(_COLUMNS)
    ids, order = ("id,", "id") if "id" in columns else ("", "time_ns, event_id")
    key = "k" if "k" in columns else "event_key(event_id)"
    db.create_function("event_key", 1, event_key, deterministic=True)
    db.execute("BEGIN IMMEDIATE")
    try:
        for index in _OLD_INDEXES:
            db.execute(f"DROP INDEX IF EXISTS {index}")
        db.execute("ALTER TABLE events RENAME TO events_old")
        for table in (_EVENTS, _COLLIDED, _KEYS, _META):
            db.execute(table)
        db.execute("DELETE FROM event_keys")
        db.execute(f"INSERT INTO events({ids}k,{names}) SELECT {ids}{key},{names} FROM events_old ORDER BY {order}")
        db.execute("INSERT OR IGNORE INTO event_keys(k, id) SELECT k, id FROM events WHERE k IS NOT NULL "
                   "ORDER BY k, id")
        db.execute("UPDATE events SET k = NULL WHERE k IS NOT NULL AND id NOT IN (SELECT id FROM event_keys)")
        db.execute("INSERT OR IGNORE INTO collided(event_id) SELECT event_id FROM events WHERE k IS NULL")
        db.execute("INSERT OR REPLACE INTO meta(key, value) SELECT 'keys_upto', COALESCE(MAX(id), 0) FROM events")
        db.execute("DROP TABLE events_old")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _add_git_columns(db: sqlite3.Connection) -> None:
    """A store of schema 4 or 5 (or one moved over from 1..3 by an older version): the git columns (5) and the
    detail columns (6: subagent, call ids, argument digest, result size) it lacks are added, NULL in the rows it
    holds (they were stored before those existed)."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(events)")}
    missing = [c for c in _ADDED if columns and c not in columns]
    for column in missing:
        db.execute(f"ALTER TABLE events ADD COLUMN {column} {'INTEGER' if column == 'result_bytes' else 'TEXT'}")


def connect(path: Path, readonly: bool = False) -> sqlite3.Connection:
    """A connection to the store. Read-only connections never create or change the file."""
    if readonly:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        db.execute("PRAGMA query_only=1")
        return db
    private_dir(path.parent)
    create_private(path)  # 0600 before SQLite opens it; its -wal and -shm take the same mode
    db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    try:
        db.execute(f"PRAGMA page_size={PAGE_SIZE}")  # a new file only (an existing one keeps its own)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute(f"PRAGMA cache_size={-CACHE_KIB}")
        _migrate(db)
        _add_git_columns(db)
        db.executescript(_SCHEMA)
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('schema_version', ?)", (str(SCHEMA_VERSION),))
        path.chmod(0o600)
    except BaseException:
        db.close()  # a full disk: the caller tries again later, without a descriptor left behind
        raise
    return db


class UsageStore:
    """The writer. One per daemon (the collector lock guarantees it)."""

    def __init__(self, path: Path, retention_days: int = 0) -> None:
        self.path = path
        self.retention_days = retention_days
        self._db = connect(path)
        try:
            if self._db.execute("SELECT 1 FROM models LIMIT 1").fetchone() is None:  # a store from before the table
                self._db.execute("INSERT OR IGNORE INTO models SELECT DISTINCT model, COALESCE(provider, '') "
                                 "FROM events WHERE model IS NOT NULL")
            rollup.ensure(self._db)
            session_rollup.ensure(self._db)
            search_index.ensure(self._db)
            self._db.execute(titles.SCHEMA)
        except BaseException:
            self._db.close()
            raise
        self._collided = self._load_collided()
        self._upto, self._pending = self._load_pending()
        self._models = set(self._db.execute("SELECT model, provider FROM models"))
        self._pruned_day = ""
        self.inserted = 0
        self.duplicates = 0
        self.corrected = 0  # stored rows replaced by a correction (docs/merge.md)
        self.pruned = 0

    def meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (key, value))

    def _load_collided(self) -> set[str]:
        return {row[0] for row in self._db.execute("SELECT event_id FROM collided")}

    def _load_pending(self) -> tuple[int, dict[int, str]]:
        """The row id up to which ``event_keys`` holds the keys, and the keys of the rows above it."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'keys_upto'").fetchone()
        upto = int(row[0]) if row else 0
        rows = self._db.execute("SELECT k, event_id FROM events WHERE id > ? AND k IS NOT NULL", (upto,))
        return upto, dict(rows.fetchall())

    def add(self, entries: Sequence[dict[str, Any]]) -> int:
        """Insert the entries not stored yet, in one committed transaction; returns how many were new. A
        correction (``collector.correction``) updates its stored row instead (collector.usage.corrections)."""
        plain, corrected = corrections.split(entries)
        updates, inserted = self._corrections(corrected)
        rows, keys, collided = self._new_rows(list(map(event_row, [*plain, *inserted])))
        sessions = fold_sessions(session_row(e) for e in entries)
        models = {(row[10], row[9] or "") for row in rows if row[10]} - self._models
        merge = len(self._pending) + len(keys) >= MERGE_AT
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            last = rollup.last_id(db)
            corrections.apply(db, updates, _UPDATED, _NULLABLE)
            before = db.total_changes
            db.executemany(_INSERT, rows)
            added = db.total_changes - before
            db.executemany("INSERT OR IGNORE INTO collided(event_id) VALUES(?)", [(i,) for i in collided])
            rollup.add_since(db, last)
            session_rollup.add_since(db, last)
            db.executemany(_SESSION_UPSERT, sessions)
            search_index.add_since(db, search_index.batch_terms(rows), sessions)
            titles.add(db, titles.title_rows(entries))
            db.executemany("INSERT OR IGNORE INTO models(model, provider) VALUES(?, ?)", models)
            upto = self._merge_keys() if merge else self._upto
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        if merge:
            self._upto, self._pending = upto, {}
        else:
            self._pending.update(keys)
        self._collided.update(collided)
        self._models |= models
        self.inserted += added
        self.duplicates += len(entries) - added - len(updates)
        self.corrected += len(updates)
        self.prune()
        return added

    def _corrections(self, entries: list[dict[str, Any]]) -> tuple[list[tuple[int, tuple[Any, ...]]],
                                                                   list[dict[str, Any]]]:
        """The stored rows the corrections replace (row id, new values), and the corrections of rows not
        stored, to insert. A correction of an id stored without a key (a collision) is left out."""
        updates, inserted = [], []
        for entry in entries:
            row = event_row(entry)
            if str(row[1]) in self._collided:
                continue
            rowid = corrections.stored_id(self._db, row[0], str(row[1]), self._upto)
            if rowid is None:
                inserted.append(entry)
            else:
                updates.append((rowid, row[2:]))
        return updates, inserted

    def _new_rows(self, rows: list[tuple[Any, ...]]) -> tuple[list[tuple[Any, ...]], dict[int, str], set[str]]:
        """The rows of ids not stored yet, in order; the keys they take (key: id); the ids stored without a
        key because another id holds theirs."""
        pending, stored_collided = self._pending, self._collided
        held = self._held({row[0] for row in rows}.difference(pending))
        fresh: list[tuple[Any, ...]] = []
        keys: dict[int, str] = {}
        collided: set[str] = set()
        for row in rows:
            key, text = row[0], str(row[1])
            if stored_collided and text in stored_collided or text in collided:
                continue
            holder = keys.get(key)
            if holder is None:
                holder = pending.get(key)
                if holder is None:
                    holder = held.get(key)
            if holder is None:
                keys[key] = text
                fresh.append(row)
            elif holder != text:
                collided.add(text)
                fresh.append((None, *row[1:]))
        return fresh, keys, collided

    def _held(self, keys: set[int]) -> dict[int, str]:
        """Of ``keys``, those ``event_keys`` holds, with the id of the row holding each."""
        wanted, held = list(keys), dict[int, str]()
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            held.update(self._db.execute(
                f"SELECT x.k, e.event_id FROM event_keys x JOIN events e ON e.id = x.id "
                f"WHERE x.k IN ({','.join('?' * len(chunk))})", chunk).fetchall())
        return held

    def _merge_keys(self) -> int:
        """Move the keys of the rows above ``keys_upto`` into ``event_keys`` in key order (inside the
        batch's transaction: each page of ``event_keys`` is written once per merge); returns the new mark."""
        db = self._db
        upto = rollup.last_id(db)
        db.execute("INSERT OR IGNORE INTO event_keys(k, id) SELECT k, id FROM events WHERE id > ? AND k IS NOT NULL "
                   "ORDER BY k", (self._upto,))
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('keys_upto', ?)", (str(upto),))
        return upto

    def prune(self, now: float | None = None) -> int:
        """Drop rows older than the retention (once per UTC day; 0 keeps everything)."""
        now = time.time() if now is None else now
        today = utc_day(int(now * 1e9))
        if self.retention_days <= 0 or today == self._pruned_day:
            return 0
        self._pruned_day = today
        cutoff_ns = int((now - self.retention_days * 86400) * 1e9)
        db, day = self._db, utc_day(cutoff_ns)
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("DELETE FROM event_keys WHERE k IN (SELECT k FROM events WHERE day < ? AND k IS NOT NULL)",
                       (day,))
            gone = db.execute("DELETE FROM events WHERE day < ?", (day,)).rowcount
            db.execute("DELETE FROM slots WHERE slot < ?", (_day_start_slot(day),))
            session_rollup.prune(db, cutoff_ns)
            db.execute("DELETE FROM sessions WHERE last_ns < ?", (cutoff_ns,))
            search_index.prune(db)
            titles.prune(db)
            if self._collided:
                db.execute("DELETE FROM collided WHERE event_id NOT IN (SELECT event_id FROM events WHERE k IS NULL)")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        if gone:
            self._collided = self._load_collided()
            self._upto, self._pending = self._load_pending()
        self.pruned += gone
        return int(gone)

    def close(self) -> None:
        self._db.close()


def iter_rows(db: sqlite3.Connection, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
    db.row_factory = sqlite3.Row
    return list(db.execute(sql, tuple(params)))
