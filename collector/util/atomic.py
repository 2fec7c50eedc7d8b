"""Atomic file replacement: temp file in the same directory, fsync, rename, fsync the directory.

:func:`replace_atomically` is the one way the collector replaces a file; :func:`atomic_write` is it for
our own files (the folder is made private first), ``collector.deploy.fsutil.write_atomic`` for the
agents' config files (through symlinks, keeping the file's mode)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from collector.util.private import private_dir


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    private_dir(path.parent)
    replace_atomically(path, data, mode)


def replace_atomically(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace ``path`` (its folder exists) with ``data``: a reader sees the old bytes or the new, never
    a part; after a crash, one of the two. ``mode``: the new file's (default 0600, the temp file's)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
