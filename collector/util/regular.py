"""Open only regular files. Anything else an agent folder (or a hook's ``transcript_path``) can name, a
FIFO, a device, a socket, a directory, a symlink to ``/dev/zero``, is refused before a byte is read: the
file is opened with ``O_NONBLOCK`` (so a FIFO without a writer cannot block the open) and checked with
``fstat`` on the descriptor we read from (so the check and the read see the same file)."""

from __future__ import annotations

import os
import stat

from collector.util.private import file_kind as file_kind  # re-exported for the sources


class NotRegular(OSError):
    """The path exists but is not a regular file; ``kind`` says what it is."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(f"{path}: {kind}, not a regular file; refused")
        self.kind = kind


def open_regular(path: str) -> int:
    """A read-only descriptor on the regular file at ``path``; NotRegular or another OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotRegular(path, file_kind(mode))
    return fd


def check_regular(path: str) -> None:
    """Raise NotRegular if ``path`` (followed) is not a regular file; for files a library opens itself."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegular(path, file_kind(mode))


def read_regular(path: str, limit: int = 64 * 1024 * 1024) -> bytes | None:
    """At most ``limit`` bytes of a regular file, or None if it is missing, unreadable or not regular."""
    try:
        fd = open_regular(path)
    except OSError:
        return None
    try:
        return read_all(fd, limit)
    finally:
        os.close(fd)


def read_all(fd: int, limit: int) -> bytes:
    """Read ``fd`` to its end, at most ``limit`` bytes."""
    chunks, size = [], 0
    while size < limit:
        chunk = os.read(fd, min(1 << 20, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def read_line_at(path: str, offset: int, limit: int = 16 * 1024 * 1024) -> bytes | None:
    """The complete line starting at ``offset`` (without its newline), or None."""
    try:
        fd = open_regular(path)
    except OSError:
        return None
    try:
        data = os.pread(fd, limit + 1, offset)
    finally:
        os.close(fd)
    end = data.find(b"\n")
    return data[:end] if end >= 0 else None
