"""The one module that writes collector state: source positions, seen event ids (they expire after
``collector.seen_retention_days``), and component state (the correlator's and the turn step's, the JSONL
exporter's mark, today's counts, each trace exporter's open turns and unsent spans, the watchdog's repair
counts and auto-deploy's agents seen and deploys, each under its own key: :class:`KeyState`).

State lives in one SQLite database in WAL mode with ``synchronous=FULL``: a commit is one transaction,
so positions, the dedupe ids of the entries they produced and the exporters' marks move together or not
at all. Seen ids are appended to ``seen_new`` (answered from memory, reloaded at open) and move
into the keyed ``seen`` table every ``MERGE_AT`` ids in key order, inside a commit: inserted a batch at a
time, random ids wrote a page of ``seen`` each. An id's expiry counts from its first commit.
Other files under the state directory are reports (``status.json``), written through
``collector.util.atomic``; a durable queue keeps its own segments and acknowledged position in its
directory. What the user decided and what ``install`` needs to undo its edits (``agent-choices.json``,
the deploy records under ``deploy/``) stay files of their own: they are written by commands that run
without the daemon and, unlike this store, cannot be rebuilt from the outputs. A ``kill -9`` at any
point leaves the last committed transaction (SQLite's journal gives the temp-file-fsync-rename
guarantee without rewriting the whole state on every batch).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from collector.util.private import create_private, private_dir

log = logging.getLogger(__name__)

CHECKPOINTS_FILE = "checkpoints.sqlite"  # under the state directory
# A rowid table: a session's row (hundreds of bytes of state) is rewritten in place, where the WITHOUT
# ROWID table of before moved whole rows around its b-tree. No index on ``updated``: every write moved
# an entry of it, and only the hourly ``prune_sessions`` reads it (a pass over the table).
_SESSIONS = """CREATE TABLE IF NOT EXISTS sessions (scope TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
    last INTEGER NOT NULL, due INTEGER, updated REAL NOT NULL, PRIMARY KEY (scope, key))"""
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS positions (stream TEXT PRIMARY KEY, value BLOB NOT NULL, updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS seen (event_id TEXT PRIMARY KEY, at REAL NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS seen_at ON seen(at);
CREATE TABLE IF NOT EXISTS seen_new (n INTEGER PRIMARY KEY, event_id TEXT NOT NULL, at REAL NOT NULL);
{_SESSIONS};
CREATE INDEX IF NOT EXISTS sessions_due_key ON sessions(scope, due, key) WHERE due IS NOT NULL;
"""


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One session's state of one component (``scope``): the pipeline keeps the active sessions in memory
    and every other one here, so a session that left memory comes back as it was.

    ``last``: its last activity (ns), the order in which open sessions come back at start-up; ``due``: when
    the idle rule closes it (ns), ``None`` when nothing is due (closed, or the component has no timer)."""

    scope: str
    key: str
    value: Any
    last: int = 0
    due: int | None = None


@dataclass(slots=True)
class Commit:
    """What one batch changes: new positions, ids now delivered, component state."""

    positions: dict[str, dict[str, Any]] = field(default_factory=dict)
    seen_ids: list[str] = field(default_factory=list)
    kv: dict[str, Any] = field(default_factory=dict)
    forget: list[str] = field(default_factory=list)  # streams whose position is dropped
    sessions: list[SessionRow] = field(default_factory=list)  # per-session state written (or replaced)


PAGE_SIZE = 8192  # fewer, fuller pages per commit than SQLite's 4096 (a batch's random session rows)
CACHE_KIB = 8192  # SQLite's page cache (its default, 2 MiB, made a growing store re-read its pages)
MERGE_AT = 32_768  # ids in ``seen_new`` (and in memory) before they move into ``seen`` in one sorted pass
DUE_PAGE = 1000  # saved sessions read per query by the idle rule (it reads them all, a page at a time)
SAVED_BITS = 1 << 24  # the bits of the saved-sessions filter (2 MB; 150,000 sessions set about 1 % of them)


def _stream_key(stream: str) -> str | bytes:
    """A stream name as stored: text, or, when it holds a file name that is not UTF-8 (decoded with
    ``surrogateescape``, as Python gives such names), its bytes: the same file maps to the same key."""
    try:
        stream.encode()
    except UnicodeEncodeError:
        return stream.encode("utf-8", "surrogateescape")
    return stream


def _stream_name(key: str | bytes) -> str:
    return key.decode("utf-8", "surrogateescape") if isinstance(key, bytes) else key


def drop_unsavable(change: Commit) -> list[tuple[str, str]]:
    """Remove from ``change`` each part this store cannot write (a value orjson refuses: an int past 64
    bits, a lone surrogate, a type it does not know) and say which, as (kind, what and why): the rest of the
    commit can go in. Only asked after a commit failed on the data, so it may be slow."""
    dropped: list[tuple[str, str]] = []

    def bad(value: Any) -> str | None:
        try:
            orjson.dumps(value)
        except (TypeError, ValueError) as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    for stream, value in list(change.positions.items()):
        reason = bad(value)
        if reason:
            del change.positions[stream]
            dropped.append(("position", f"the position of {stream!r} ({reason})"))
    for key, value in list(change.kv.items()):
        reason = bad(value)
        if reason:
            del change.kv[key]
            dropped.append(("state", f"state {key!r} ({reason})"))
    kept = []
    for row in change.sessions:
        reason = bad(row.value) or bad([row.last, row.due]) or bad(row.key)
        if reason:
            dropped.append(("session state", f"the {row.scope} state of session {row.key!r} ({reason})"))
        else:
            kept.append(row)
    change.sessions = kept
    ids = [i for i in change.seen_ids if isinstance(i, str) and bad(i) is None]
    if len(ids) != len(change.seen_ids):
        dropped.append(("event ids", f"{len(change.seen_ids) - len(ids)} event ids that are not text"))
        change.seen_ids = ids
    return dropped


class CheckpointStore:
    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        private_dir(path.parent)
        create_private(path)  # before SQLite: its -wal and -shm files take the database's mode
        self.path = path
        self.clock = clock  # when an id was seen: its expiry (prune_seen) counts from here
        self._lock = threading.RLock()  # one connection, used by the delivery worker and the queues' threads
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        try:
            self._open()
        except BaseException:
            self._db.close()  # a corrupt file (collector.state.rebuild moves it aside): no descriptor left on it
            raise
        self._saved: bytearray | None = None  # a bit per hash((scope, key)) of every saved session (clear: never
        # saved; set: maybe, ask SQLite), loaded when first asked: 2 MB, where a set of 150,000 hashes held 13 MB

    def _open(self) -> None:
        db = self._db
        db.execute(f"PRAGMA page_size={PAGE_SIZE}")  # a new file only (an existing one keeps its own)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute(f"PRAGMA cache_size={-CACHE_KIB}")
        _migrate_sessions(db)
        db.executescript(_SCHEMA)
        self._new = {row[0] for row in db.execute("SELECT event_id FROM seen_new")}

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def integrity(self) -> str:
        """SQLite's ``quick_check``: "ok", or what is wrong (collector.state.rebuild acts on it)."""
        row = self._db.execute("PRAGMA quick_check").fetchone()
        return str(row[0]) if row else "no answer"

    def positions(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT stream, value FROM positions").fetchall()
        return {_stream_name(stream): orjson.loads(value) for stream, value in rows}

    def get(self, key: str, default: Any = None) -> Any:
        with self._lock:
            row = self._db.execute("SELECT value FROM kv WHERE key=?", (key,)).fetchone()
        return orjson.loads(row[0]) if row else default

    def seen(self, ids: Iterable[str]) -> set[str]:
        """The subset of ``ids`` already delivered (those of ``seen_new`` answered from memory)."""
        with self._lock:
            ids = list(ids)
            found = {i for i in ids if i in self._new}
        rest = [i for i in ids if i not in found]
        for start in range(0, len(rest), 500):
            chunk = rest[start : start + 500]
            marks = ",".join("?" * len(chunk))
            with self._lock:
                rows = self._db.execute(f"SELECT event_id FROM seen WHERE event_id IN ({marks})", chunk).fetchall()
            found.update(r[0] for r in rows)
        return found

    def commit(self, change: Commit) -> None:
        with self._lock:
            self._commit(change)

    def _commit(self, change: Commit) -> None:
        now = self.clock()
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany(
                "INSERT INTO positions(stream, value, updated) VALUES(?,?,?) "
                "ON CONFLICT(stream) DO UPDATE SET value=excluded.value, updated=excluded.updated",
                [(_stream_key(s), orjson.dumps(v), now) for s, v in change.positions.items()],
            )
            db.executemany("DELETE FROM positions WHERE stream=?", [(_stream_key(s),) for s in change.forget])
            fresh = [i for i in dict.fromkeys(change.seen_ids) if i not in self._new]
            db.executemany("INSERT INTO seen_new(event_id, at) VALUES(?,?)", [(i, now) for i in fresh])
            merge = len(self._new) + len(fresh) >= MERGE_AT
            if merge:
                _merge_new(db)
            db.executemany(
                "INSERT INTO kv(key, value) VALUES(?,?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                [(k, orjson.dumps(v)) for k, v in change.kv.items()],
            )
            db.executemany(
                "INSERT INTO sessions(scope, key, value, last, due, updated) VALUES(?,?,?,?,NULLIF(?, ''),?) "
                "ON CONFLICT(scope, key) DO UPDATE SET value=excluded.value, last=excluded.last, "
                "due=excluded.due, updated=excluded.updated",  # '' for NULL: binding None costs an adapter lookup
                [(r.scope, r.key, orjson.dumps(r.value), r.last, "" if r.due is None else r.due, now)
                 for r in change.sessions],
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        if merge:
            self._new.clear()
        else:
            self._new.update(fresh)
        if self._saved is not None:
            _mark(self._saved, (hash((r.scope, r.key)) for r in change.sessions))

    def prune_seen(self, older_than_s: float) -> int:
        """Forget the ids delivered more than ``older_than_s`` ago (``collector.seen_retention_days``): a
        record read again after that long counts as new. Returns how many went."""
        cutoff = self.clock() - older_than_s
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                gone = {r[0] for r in db.execute("DELETE FROM seen WHERE at < ? RETURNING event_id", (cutoff,))}
                again = [i for i in gone if i in self._new]  # committed again later: the first time counts
                for start in range(0, len(again), 500):
                    chunk = again[start : start + 500]
                    db.execute(f"DELETE FROM seen_new WHERE event_id IN ({','.join('?' * len(chunk))})", chunk)
                gone.update(r[0] for r in db.execute("DELETE FROM seen_new WHERE at < ? RETURNING event_id",
                                                     (cutoff,)))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            self._new.difference_update(gone)
            return len(gone)

    def session(self, scope: str, key: str) -> Any:
        """The saved state of one session, or None (a session never saved is answered from memory)."""
        with self._lock:
            if self._saved is None:
                self._saved = bytearray(SAVED_BITS // 8)
                _mark(self._saved, (hash(k) for k in self._db.execute("SELECT scope, key FROM sessions")))
            bit = hash((scope, key)) & (SAVED_BITS - 1)
            if not self._saved[bit >> 3] & (1 << (bit & 7)):
                return None
            row = self._db.execute("SELECT value FROM sessions WHERE scope=? AND key=?", (scope, key)).fetchone()
        return orjson.loads(row[0]) if row else None

    def sessions_due(self, scope: str, until: int, page: int | None = None) -> Iterator[tuple[str, Any]]:
        """Every saved session whose ``due`` is at or before ``until``, earliest first, read in pages of
        ``page`` rows along the index (a keyset cursor on (due, key): no scan, no offset; the lock is held
        per page only)."""
        page = page or DUE_PAGE
        after: tuple[int, str] = (-(2**63), "")
        while True:
            with self._lock:
                rows = self._db.execute(
                    "SELECT due, key, value FROM sessions WHERE scope=? AND due IS NOT NULL AND due<=? "
                    "AND (due, key) > (?, ?) ORDER BY due, key LIMIT ?", (scope, until, *after, page),
                ).fetchall()
            for _, key, value in rows:
                yield key, orjson.loads(value)
            if len(rows) < page:
                return
            after = (rows[-1][0], rows[-1][1])

    def recent_sessions(self, scope: str, limit: int, open_only: bool = False) -> list[tuple[str, Any]]:
        """The ``limit`` most recently active saved sessions, least recent first (to refill a cache)."""
        where = " AND due IS NOT NULL" if open_only else ""
        with self._lock:
            rows = self._db.execute(
                f"SELECT key, value FROM sessions WHERE scope=?{where} ORDER BY last DESC LIMIT ?", (scope, limit)
            ).fetchall()
        return [(key, orjson.loads(value)) for key, value in reversed(rows)]

    def prune_sessions(self, older_than_s: float) -> int:
        """Forget session state not written for ``older_than_s`` (as the dedupe ids expire)."""
        with self._lock:
            cur = self._db.execute("DELETE FROM sessions WHERE updated < ?", (self.clock() - older_than_s,))
            return cur.rowcount

    def seen_count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM seen").fetchone()[0]) + len(self._new)

    def put(self, values: Mapping[str, Any]) -> None:
        """Component state outside a batch's commit (the trace exporters' open turns, from their queue)."""
        self.commit(Commit(kv=dict(values)))


def _migrate_sessions(db: sqlite3.Connection) -> None:
    """Session state saved in the WITHOUT ROWID table of before (with its two indexes) moves into the
    rowid table, in one transaction."""
    row = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'sessions'").fetchone()
    if row is None or "WITHOUT ROWID" not in row[0].upper():
        return
    columns = "scope, key, value, last, due, updated"
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("DROP INDEX IF EXISTS sessions_due")
        db.execute("DROP INDEX IF EXISTS sessions_updated")
        db.execute("ALTER TABLE sessions RENAME TO sessions_old")
        db.execute(_SESSIONS)
        db.execute(f"INSERT INTO sessions({columns}) SELECT {columns} FROM sessions_old ORDER BY last")
        db.execute("DROP TABLE sessions_old")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _merge_new(db: sqlite3.Connection) -> None:
    """Move the ids of ``seen_new`` into ``seen`` in key order (inside the caller's transaction): each page
    of ``seen`` is written once per merge, where an id a batch inserted in random order cost a page each.
    An id already in ``seen`` keeps its first time (its expiry)."""
    db.execute("INSERT OR IGNORE INTO seen(event_id, at) SELECT event_id, MIN(at) FROM seen_new "
               "GROUP BY event_id ORDER BY event_id")
    db.execute("DELETE FROM seen_new")


@dataclass(slots=True)
class KeyState:
    """One component's slot in the store: what it saved last (``load``), and ``save`` to replace it."""

    store: CheckpointStore
    key: str

    def load(self) -> Any:
        return self.store.get(self.key)

    def save(self, value: Any) -> None:
        self.store.put({self.key: value})

    def adopt(self, legacy: Path) -> None:
        """Move a component's state from the JSON file an older version kept it in (``legacy``) into
        this slot: read once when the slot is empty, then the file goes (an unreadable one too)."""
        if not legacy.is_file():
            return
        if self.load() is None:
            try:
                self.save(orjson.loads(legacy.read_bytes()))
                log.info("%s moved into the checkpoint store (%s)", legacy, self.key)
            except (OSError, orjson.JSONDecodeError) as exc:
                log.warning("%s is unreadable (%s); %s starts afresh", legacy, exc, self.key)
        with contextlib.suppress(FileNotFoundError):
            legacy.unlink()


def _mark(bits: bytearray, hashes: Iterable[int]) -> None:
    for h in hashes:
        bit = h & (SAVED_BITS - 1)
        bits[bit >> 3] |= 1 << (bit & 7)


def read_saved(path: Path, keys: Iterable[str]) -> dict[str, Any]:
    """The saved values of ``keys`` (those present), read from the store at ``path`` without writing
    (``agent-collector status`` beside a running daemon); nothing when there is no readable store."""
    if not path.is_file():
        return {}
    keys = list(keys)
    try:
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            marks = ",".join("?" * len(keys))
            rows = db.execute(f"SELECT key, value FROM kv WHERE key IN ({marks})", keys).fetchall()
        finally:
            db.close()
        return {key: orjson.loads(value) for key, value in rows}
    except (sqlite3.Error, orjson.JSONDecodeError) as exc:
        log.warning("cannot read %s: %s", path, exc)
        return {}
