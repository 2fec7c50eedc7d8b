"""Small file helpers: read-or-absent, atomic replace that keeps mode and symlinks, hashes."""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

from collector.util.atomic import replace_atomically

ABSENT_SHA = "absent"


def sha256_of(data: bytes | None) -> str:
    return ABSENT_SHA if data is None else hashlib.sha256(data).hexdigest()


def read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def real_target(path: Path) -> Path:
    """Where a write must go: through symlinks (dotfile managers link settings files)."""
    return path.resolve() if path.is_symlink() else path


def missing_parents(path: Path) -> list[Path]:
    """Ancestors of ``path`` that do not exist yet, outermost first."""
    out: list[Path] = []
    parent = path.parent
    while not parent.exists():
        out.append(parent)
        if parent.parent == parent:
            break
        parent = parent.parent
    return list(reversed(out))


def write_atomic(path: Path, data: bytes, mode: int | None = None, private: bool = False) -> None:
    """Write via a temp file in the same directory, fsync, then rename over ``path``
    (:func:`collector.util.atomic.replace_atomically`).

    Keeps the mode of the file it replaces (or uses ``mode``/0o644 for a new file); ``private`` (a file
    holding the ingest secret) makes it 0600 whatever it was."""
    target = real_target(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        keep_mode: int | None = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        keep_mode = mode if mode is not None else 0o644
    if private:
        keep_mode = 0o600
    replace_atomically(target, data, keep_mode)


def remove_file(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        real_target(path).unlink()


def remove_empty_dirs(dirs: list[Path]) -> list[Path]:
    """Remove the given directories, innermost first, when empty; returns the ones removed."""
    removed = []
    for directory in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        try:
            directory.rmdir()
            removed.append(directory)
        except OSError:
            continue
    return removed
