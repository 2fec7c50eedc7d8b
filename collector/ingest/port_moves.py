"""The daemon's note that its ingest port was taken and where it listens instead
(``<state dir>/ingest.moved.json``): written when it moves, removed when it listens on its own port
again; `status` and `doctor` print it."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import orjson

from collector.paths import Paths
from collector.util.atomic import atomic_write

FILE = "ingest.moved.json"


def _file(paths: Paths) -> Path:
    return paths.state_dir / FILE


def record(paths: Paths, taken: int, port: int, owner_uid: int | None) -> None:
    note = {"taken_port": taken, "port": port, "owner_uid": owner_uid, "since": time.time()}
    with contextlib.suppress(OSError):
        atomic_write(_file(paths), orjson.dumps(note), mode=0o600)


def clear(paths: Paths) -> None:
    with contextlib.suppress(OSError):
        _file(paths).unlink()


def read(paths: Paths) -> dict[str, Any] | None:
    """The note, or None (none, or not ours to trust: anything odd in it reads as none)."""
    try:
        note = orjson.loads(_file(paths).read_bytes()[:4096])
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(note, dict) or not all(isinstance(note.get(k), int) for k in ("taken_port", "port")):
        return None
    return note


def describe(note: dict[str, Any]) -> str:
    uid = note.get("owner_uid")
    who = f"another user (uid {uid})" if isinstance(uid, int) else "another program"
    return (f"ingest port {note['taken_port']} was held by {who}: the daemon listens on {note['port']} "
            f"instead (the hooks spool and are not affected)")
