"""The three corpora of benchmarks/peers.py, built from the real agent sessions in tests/fixtures:
every copy of a session gets fresh ids (each id of the original replaced, consistently, by a random one of
the same shape), so the copies are distinct sessions with the agent's own record shapes and text.

- ``claude``: Claude Code transcripts, one replay of a real session per file (~280 KB each).
- ``mixed``: the five agents side by side, an equal share of the bytes each: Claude Code, Codex, Gemini CLI
  and Qwen Code session files, OpenCode sessions as rows of one ``opencode.db`` (every fixture case of each
  agent, cycled).
- ``small``: many small Claude Code transcripts: the fixture sessions without the lines of 4 KB and more
  (Claude Code's context snapshots: skill listings, prompt snapshots, request shapes), 15-32 KB each.
"""

from __future__ import annotations

import random
import re
import shutil
import sqlite3
import string
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
FILE_AGENTS = ("claude-code", "codex", "gemini-cli", "qwen-code")
OPENCODE_DB = Path(".local/share/opencode/opencode.db")
OPENCODE_TABLES = ("session", "message", "part")

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_PREFIXED = r"(?:msg|toolu|srvtoolu|call|req|ses|prt|evt|resp|fc|chatcmpl)[_-][A-Za-z0-9]{8,}"
IDS = re.compile(rf"(?<![0-9A-Za-z])(?:{_UUID}|{_PREFIXED}|[0-9a-f]{{32}})(?![0-9A-Za-z])")


class Renamer:
    """One fresh random id per original id, of the same shape (uuid, prefix + alphabet, hex)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.mapping: dict[str, str] = {}

    def _fresh(self, old: str) -> str:
        if _hexish(old):
            return "".join(c if c == "-" else self.rng.choice("0123456789abcdef") for c in old)
        cut = min(i for i in (old.find("_"), old.find("-")) if i >= 0) + 1
        alphabet = string.ascii_letters + string.digits
        return old[:cut] + "".join(self.rng.choice(alphabet) for _ in old[cut:])

    def __call__(self, text: str) -> str:
        def sub(m: re.Match[str]) -> str:
            old = m.group(0)
            if old not in self.mapping:
                self.mapping[old] = self._fresh(old)
            return self.mapping[old]

        return IDS.sub(sub, text)

    def path(self, rel: str) -> str:
        """A file's relative path: full ids renamed, and the 8-hex short form Gemini CLI puts in names."""
        rel = self(rel)
        for old, new in self.mapping.items():
            if _hexish(old) and len(old) == 36 and old[:8] in rel:
                rel = rel.replace(old[:8], new[:8])
        return rel


def _hexish(text: str) -> bool:
    return all(c in "0123456789abcdef-" for c in text)


@dataclass(frozen=True)
class Session:
    """One fixture case of one agent: its files (relative path -> lines)."""

    agent: str
    case: str
    files: dict[str, list[str]]

    @property
    def size(self) -> int:
        return sum(len(x.encode()) + 1 for lines in self.files.values() for x in lines)


def file_sessions(agent: str, keep: Callable[[str], bool] = lambda line: True) -> list[Session]:
    out = []
    for case in sorted(p.parent for p in (FIXTURES / agent).glob("*/expected.json")):
        home = case / "home"
        files = {str(p.relative_to(home)): [x for x in p.read_text(encoding="utf-8").splitlines() if keep(x)]
                 for p in sorted(home.rglob("*.json*")) if p.is_file()}
        if files:
            out.append(Session(agent, case.name, files))
    return out


def write_copy(home: Path, session: Session, renamer: Renamer) -> int:
    written = 0
    for rel, lines in session.files.items():
        text = "\n".join(renamer(x) for x in lines) + "\n"
        path = home / renamer.path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written += len(text.encode())
    return written


def _cycle(sessions: list[Session]) -> Iterator[Session]:
    while True:
        yield from sessions


@dataclass
class Corpus:
    home: Path
    sessions: int = 0
    bytes: int = 0

    @property
    def mb(self) -> float:
        return self.bytes / 1e6

    def files(self) -> list[Path]:
        """Every file an agent wrote (the orjson floor parses each line of these)."""
        return sorted(p for p in self.home.rglob("*.json*") if p.is_file() and ".agentsview" not in p.parts)

    def databases(self) -> list[Path]:
        db = self.home / OPENCODE_DB
        return [db] if db.exists() else []


def build_claude(home: Path, target_mb: float, seed: int = 1) -> Corpus:
    """Replays of the real two_turns_resume transcript, one per file, until target_mb."""
    rng = random.Random(seed)
    corpus = Corpus(home)
    session = next(s for s in file_sessions("claude-code") if s.case == "two_turns_resume")
    while corpus.bytes < target_mb * 1e6:
        corpus.bytes += write_copy(home, session, Renamer(rng))
        corpus.sessions += 1
    return corpus


def build_small(home: Path, count: int, seed: int = 2) -> Corpus:
    """``count`` Claude Code transcripts: every fixture case cycled, lines of 4 KB and more left out."""
    rng = random.Random(seed)
    corpus = Corpus(home)
    sessions = _cycle(file_sessions("claude-code", keep=lambda line: len(line) < 4096))
    for _ in range(count):
        corpus.bytes += write_copy(home, next(sessions), Renamer(rng))
        corpus.sessions += 1
    return corpus


def build_mixed(home: Path, target_mb: float, seed: int = 3) -> Corpus:
    """An equal share of target_mb for each of the five agents (OpenCode as rows of its database)."""
    rng = random.Random(seed)
    corpus = Corpus(home)
    share = target_mb * 1e6 / (len(FILE_AGENTS) + 1)
    for agent in FILE_AGENTS:
        sessions, size = _cycle(file_sessions(agent)), 0
        while size < share:
            size += write_copy(home, next(sessions), Renamer(rng))
            corpus.sessions += 1
        corpus.bytes += size
    count, size = build_opencode(home / OPENCODE_DB, share, rng)
    corpus.sessions += count
    corpus.bytes += size
    return corpus


def build_opencode(db: Path, target_bytes: float, rng: random.Random) -> tuple[int, int]:
    """OpenCode's own database (schema of the fixture, WAL mode) holding copies of every fixture case's
    session, message and part rows with fresh ids until the database file holds target_bytes; returns
    (sessions, bytes on disk)."""
    cases = sorted((FIXTURES / "opencode").glob(f"*/home/{OPENCODE_DB}"))
    db.parent.mkdir(parents=True, exist_ok=True)
    out = sqlite3.connect(db)
    templates = [_rows(case, out if n == 0 else None) for n, case in enumerate(cases)]
    for table in OPENCODE_TABLES + ("project",):
        out.execute(f"DELETE FROM {table}")
    sessions = size = 0
    while size < target_bytes:
        for rows in templates:
            renamer = Renamer(rng)
            for table, values in rows.items():
                for row in values:
                    new = [renamer(v) if isinstance(v, str) else v for v in row]
                    verb = "INSERT OR IGNORE" if table == "project" else "INSERT"
                    out.execute(f"{verb} INTO {table} VALUES ({','.join('?' * len(new))})", new)
            sessions += len(rows["session"])
        out.commit()
        size = _on_disk(out)
    out.execute("PRAGMA journal_mode=WAL")
    out.close()
    return sessions, size


def _on_disk(con: sqlite3.Connection) -> int:
    return int(con.execute("PRAGMA page_count").fetchone()[0]) * int(con.execute("PRAGMA page_size").fetchone()[0])


def _rows(db: Path, backup_to: sqlite3.Connection | None) -> dict[str, list[tuple[object, ...]]]:
    """The rows of a fixture database, read from a copy (a reader of a WAL database writes its -shm)."""
    with tempfile.TemporaryDirectory() as tmp:
        for suffix in ("", "-wal"):
            if Path(f"{db}{suffix}").exists():
                shutil.copyfile(f"{db}{suffix}", f"{tmp}/copy.db{suffix}")
        con = sqlite3.connect(f"{tmp}/copy.db")
        rows = {t: con.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in OPENCODE_TABLES}
        rows["project"] = con.execute("SELECT * FROM project").fetchall()
        if backup_to is not None:
            con.backup(backup_to)
        con.close()
    return rows


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
