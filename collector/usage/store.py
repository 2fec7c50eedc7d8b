"""The local usage store: every entry's numbers in one SQLite database under the data directory.

One row per entry (``events``, a rowid table appended in arrival order, unique by its id) with its
time, UTC day, agent, session, model, tokens, tool outcome, error class and git attribution (the
repository's normalised remote URL or name, the branch, the working tree's path: the pipeline's
``vcs.*``/``git.worktree.path`` fields, ``collector.pipeline.git_attributes``), one row per session
(``sessions``) with its project (the workspace path), model and last status, the models seen (``models``,
for the price lookup) and the rollup the reports read (``slots``, see ``collector.usage.rollup``). Random
ids land on random pages, so the id's key is kept apart (below); one index (name, time) serves the
dashboard. No prompt, completion or tool text is kept; an error's message only when content capture put
it in the entry.

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

import functools
import hashlib
import math
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import collector.usage.rollup as rollup
from collector.util.git_url import normalise
from collector.util.private import create_private, private_dir

SCHEMA_VERSION = 5  # 2: ``events`` is a rowid table (appended in arrival order); 3: unique by an integer key;
# 4: the keys in ``event_keys``, merged in sorted passes; 5: repo, branch, worktree (added to older rows as NULL)
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
  worktree TEXT
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
# NULL is bound as '' and turned back by NULLIF (no label is '', no number is text): Python's sqlite3 binds a
# None through an adapter lookup that raises and clears two AttributeErrors, 180 ns each, where a str is
# bound at once; a row has a dozen.
_NOT_NULL = {"event_id", "name", "time_ns", "day", "agent", "input", "output", "cache_read", "cache_write", "reasoning"}
_INSERT = (f"INSERT OR IGNORE INTO events(k,{','.join(_COLUMNS + GIT_COLUMNS)}) VALUES(?,"
           + ",".join("?" if c in _NOT_NULL else "NULLIF(?, '')" for c in _COLUMNS + GIT_COLUMNS) + ")")
_KEY_BIAS = 1 << 63
_KEY_MASK = (1 << 64) - 1
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


def utc_day(time_ns: int) -> str:
    return _day_name(math.floor(time_ns / 1e9) // 86_400)  # the second as gmtime(time_ns / 1e9) saw it


@functools.lru_cache(maxsize=1024)
def _day_name(day: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(day * 86_400))


def _int(entry: dict[str, Any], key: str) -> int:
    return _as_int(entry.get(key))


def _as_int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _as_num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text(entry: dict[str, Any], key: str) -> str | None:
    value = entry.get(key)
    return value if isinstance(value, str) and value else None


_TEXTS = ("gen_ai.session.id", "gen_ai.turn.id", "gen_ai.agent.scope", "gen_ai.provider.name", "gen_ai.response.model",
          "gen_ai.request.model", "gen_ai.tool.name", "tool.result.status", "error.type", "error.message")
_INTS = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens",
         "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.reasoning_tokens")


def event_row(entry: dict[str, Any]) -> tuple[Any, ...]:
    """The store's row for one entry as it is bound (its key first, ``''`` for NULL): numbers and labels only, never
    content text (``detail`` holds an error message only when content capture kept ``error.message`` in the
    entry). Labels are non-empty strings, token counts ints (0 when absent or not a number), cost and
    latency floats, the HTTP status an int."""
    get = entry.get
    time_ns = int(entry["time_unix_nano"])
    session, turn, scope, provider, response_model, request_model, tool, tool_status, error_type, detail = [
        v if isinstance(v, str) and v else "" for v in map(get, _TEXTS)]
    tokens = [0 if v is None else v if type(v) is int else _as_int(v) for v in map(get, _INTS)]
    cost, duration, http_status = get("gen_ai.usage.cost_usd"), get("duration_ms"), get("http.response.status_code")
    event_id = entry["event.id"]
    return (event_key(event_id), event_id, entry["event.name"], time_ns, utc_day(time_ns), entry["gen_ai.agent.type"],
            session, turn, scope, provider, response_model or request_model, *tokens, _bound_num(cost),
            _bound_num(duration), tool, tool_status, error_type, http_status if isinstance(http_status, int) else "",
            detail, *git_labels(entry))


def git_labels(entry: dict[str, Any]) -> tuple[str, str, str]:
    """The entry's repository (its remote URL in one form, ``collector.util.git_url``, else its name), branch and
    working tree, ``''`` where absent. A URL the agent itself sent in another form is normalised too; one that is no
    repository address gives way to the name."""
    url, name = entry.get("vcs.repository.url.full"), entry.get("vcs.repository.name")
    repo = _repo_form(url) if isinstance(url, str) and url else None
    if not repo:
        repo = name if isinstance(name, str) else ""
    branch, worktree = entry.get("vcs.ref.head.name"), entry.get("git.worktree.path")
    return repo, branch if isinstance(branch, str) else "", worktree if isinstance(worktree, str) else ""


@functools.lru_cache(maxsize=1024)
def _repo_form(url: str) -> str | None:
    """``normalise`` (about 8 us a call) once per URL: a store's entries name a handful of repositories."""
    return normalise(url)


def _bound_num(value: Any) -> float | str:
    number = None if value is None else _as_num(value)
    return "" if number is None else number


def event_key(event_id: Any) -> int:
    """The unique key of an id, a signed 64-bit INTEGER: its first 16 hex digits (the ids the parsers make
    are hashes in hex), else 8 bytes of its BLAKE2b. Equal ids give equal keys; two ids with one key are
    told apart by ``UsageStore`` (``collided``)."""
    text = event_id if isinstance(event_id, str) else str(event_id)
    try:
        value = int(text[:16], 16)
    except ValueError:
        value = int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")
    return (value & _KEY_MASK) - _KEY_BIAS


def session_row(entry: dict[str, Any]) -> tuple[Any, ...] | None:
    """The session's row of one entry as it is bound (``''`` for NULL), or None without a session."""
    session = _text(entry, "gen_ai.session.id")
    if session is None:
        return None
    time_ns = int(entry["time_unix_nano"])
    status = _text(entry, "session.status") if entry["event.name"] == "session.status" else None
    model = _text(entry, "agent.model") or _text(entry, "gen_ai.response.model") or _text(entry, "gen_ai.request.model")
    project = _text(entry, "workspace.root") or _text(entry, "workspace.path")
    return (entry["gen_ai.agent.type"], session, project or "", model or "", time_ns, time_ns,
            status or "", time_ns if status else "")


def fold_sessions(rows: Iterable[tuple[Any, ...] | None]) -> list[tuple[Any, ...]]:
    """One row per session of a batch, folded in order by the rules of ``_SESSION_UPSERT`` (first project
    and model, earliest first, latest last, the status with the latest time, a later one on a tie), so one
    upsert per session gives what one per entry gave."""
    folded: dict[tuple[str, str], tuple[Any, ...]] = {}
    for row in rows:
        if row is None:
            continue
        key = (row[0], row[1])
        old = folded.get(key)
        if old is None:
            folded[key] = row
            continue
        newer = row[6] != "" and row[7] >= (old[7] or 0)
        folded[key] = (key[0], key[1], old[2] or row[2], old[3] or row[3], min(old[4], row[4]), max(old[5], row[5]),
                       row[6] if newer else old[6], row[7] if newer else old[7])
    return list(folded.values())


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
    """A store of schema 4 (or one moved over from 1..3 by an older version): ``repo``, ``branch`` and
    ``worktree`` are added, NULL in the rows it holds (they were stored before the attribution existed)."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(events)")}
    missing = [c for c in GIT_COLUMNS if columns and c not in columns]
    for column in missing:
        db.execute(f"ALTER TABLE events ADD COLUMN {column} TEXT")


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
        except BaseException:
            self._db.close()
            raise
        self._collided = self._load_collided()
        self._upto, self._pending = self._load_pending()
        self._models = set(self._db.execute("SELECT model, provider FROM models"))
        self._pruned_day = ""
        self.inserted = 0
        self.duplicates = 0
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
        """Insert the entries not stored yet, in one committed transaction; returns how many were new."""
        rows, keys, collided = self._new_rows(list(map(event_row, entries)))
        sessions = fold_sessions(session_row(e) for e in entries)
        models = {(row[10], row[9] or "") for row in rows if row[10]} - self._models
        merge = len(self._pending) + len(keys) >= MERGE_AT
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            last = rollup.last_id(db)
            before = db.total_changes
            db.executemany(_INSERT, rows)
            added = db.total_changes - before
            db.executemany("INSERT OR IGNORE INTO collided(event_id) VALUES(?)", [(i,) for i in collided])
            rollup.add_since(db, last)
            db.executemany(_SESSION_UPSERT, sessions)
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
        self.duplicates += len(entries) - added
        self.prune()
        return added

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
            db.execute("DELETE FROM sessions WHERE last_ns < ?", (cutoff_ns,))
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
