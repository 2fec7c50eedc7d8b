"""A session's title for the dashboard: the start of its first prompt, kept only when content capture put the
prompt in the entry (``gen_ai.input.messages`` of a ``user.prompt``, masked by the pipeline before any exporter
sees it); with capture off the entries carry no text and nothing is kept here. The dashboard shows a title
only while capture is on (``collector.dashboard.sessions``), a neutral label otherwise."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

MAX_TITLE = 120  # characters kept of the first prompt
SCHEMA = """CREATE TABLE IF NOT EXISTS session_titles (agent TEXT NOT NULL, session TEXT NOT NULL,
  time_ns INTEGER NOT NULL, title TEXT NOT NULL, PRIMARY KEY (agent, session)) WITHOUT ROWID"""
_UPSERT = """INSERT INTO session_titles(agent, session, time_ns, title) VALUES(?, ?, ?, ?)
ON CONFLICT(agent, session) DO UPDATE SET time_ns = excluded.time_ns, title = excluded.title
WHERE excluded.time_ns < session_titles.time_ns"""


def prompt_text(messages: Any) -> str | None:
    """The first text part of an OpenTelemetry GenAI message list (or a plain string), whitespace collapsed and
    cut to ``MAX_TITLE``; None for anything else."""
    text = messages if isinstance(messages, str) else None
    if isinstance(messages, list):
        for message in messages[:8]:
            parts = message.get("parts") if isinstance(message, dict) else None
            for part in parts[:8] if isinstance(parts, list) else []:
                if isinstance(part, dict) and isinstance(part.get("content"), str) and part["content"].strip():
                    text = part["content"]
                    break
            if text is not None:
                break
    if text is None:
        return None
    words = " ".join(text[: MAX_TITLE * 4].split())
    return (words[: MAX_TITLE - 1] + "…" if len(words) > MAX_TITLE else words) or None


def title_rows(entries: Iterable[dict[str, Any]]) -> list[tuple[str, str, int, str]]:
    """(agent, session, time, title) of each prompt entry that carries its text."""
    rows = []
    for entry in entries:
        if entry.get("event.name") != "user.prompt" or "gen_ai.input.messages" not in entry:
            continue
        session, title = entry.get("gen_ai.session.id"), prompt_text(entry.get("gen_ai.input.messages"))
        if isinstance(session, str) and session and title:
            rows.append((str(entry["gen_ai.agent.type"]), session, int(entry["time_unix_nano"]), title))
    return rows


def add(db: sqlite3.Connection, rows: Sequence[tuple[str, str, int, str]]) -> None:
    """Inside a batch's transaction: each session keeps the title of its earliest prompt."""
    if rows:
        db.executemany(_UPSERT, rows)


def prune(db: sqlite3.Connection) -> None:
    """Inside the retention's transaction, after the sessions it dropped: their titles go."""
    db.execute("DELETE FROM session_titles WHERE NOT EXISTS (SELECT 1 FROM sessions s "
               "WHERE s.agent = session_titles.agent AND s.session = session_titles.session)")


def titles(db: sqlite3.Connection, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The titles of these (agent, session) pairs (by the table's key); none from a store without the table."""
    found: dict[tuple[str, str], str] = {}
    try:
        for agent, session in pairs:
            row = db.execute("SELECT title FROM session_titles WHERE agent = ? AND session = ?",
                             (agent, session)).fetchone()
            if row is not None:
                found[(agent, session)] = str(row[0])
    except sqlite3.OperationalError:
        return {}
    return found
