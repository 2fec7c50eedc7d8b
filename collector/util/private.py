"""Private by construction: every directory we create is 0700 and every file 0600, set explicitly
(``chmod``/``fchmod`` after creating, so the umask never decides), and files are opened with
``O_NOFOLLOW`` so a symlink planted under a name we are about to use (tomorrow's output file, a spool
file) is refused instead of followed. ``repair`` tightens what an older version, another tool or a loose
umask left behind in our own directories, and says what it changed."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def private_dir(path: Path) -> Path:
    """``mkdir -p`` where every directory this call creates is 0700 (existing ones are left as they are)."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, DIR_MODE)
            os.chmod(directory, DIR_MODE)  # the umask may have taken bits away; never adds
    return path


class NotRegularFile(OSError):
    """One of our own files is a directory, a FIFO, a device or a socket: nothing of ours can live there.
    Its message is the one line a command prints."""


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words (also the sources' refusals, ``collector.util.regular``)."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def not_regular(path: Path | str, mode: int) -> NotRegularFile:
    return NotRegularFile(f"{path} is {file_kind(mode)}, not a regular file: agent-collector keeps its own file "
                          f"there; move that away and start again")


def open_private(path: Path | str, flags: int = os.O_WRONLY | os.O_APPEND | os.O_CREAT) -> int:
    """``os.open`` that never follows a symlink at ``path`` and leaves the file 0600 (our own files only:
    a file we open for writing is ours, so its mode is set even when it already existed). Never blocks on
    a FIFO: anything but a regular file is :class:`NotRegularFile`."""
    try:
        fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, FILE_MODE)
    except OSError as exc:  # EISDIR; ENXIO: a FIFO nobody reads, opened for writing
        mode = stat.S_IFREG
        with contextlib.suppress(OSError):
            mode = os.lstat(path).st_mode
        if not stat.S_ISREG(mode) and not stat.S_ISLNK(mode):
            raise not_regular(path, mode) from exc
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(path, st.st_mode)
        if os.get_blocking(fd) is False and not flags & os.O_NONBLOCK:
            os.set_blocking(fd, True)
        if stat.S_IMODE(st.st_mode) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def opener(path: str, flags: int) -> int:
    """For ``open(path, mode, opener=opener)``: the same guarantees as :func:`open_private`."""
    return open_private(path, flags)


def create_private(path: Path) -> None:
    """Make sure ``path`` exists as a 0600 regular file (e.g. before SQLite opens it: its -wal and -shm
    files then get the database's mode)."""
    os.close(open_private(path, os.O_RDWR | os.O_CREAT))


def loose(mode: int) -> bool:
    return bool(stat.S_IMODE(mode) & 0o077)


def repair(roots: Iterable[Path], skip: Iterable[str] = ("venv",)) -> list[Path]:
    """Remove group/other bits from every directory and regular file under ``roots`` (our own
    directories), never following symlinks and not descending into ``skip`` (the program's own venv).
    Returns what was changed."""
    skipped = set(skip)
    changed: list[Path] = []
    for root in roots:
        if not root.is_dir() or root.is_symlink():
            continue
        changed += [p for p in [root, *_walk(root, skipped)] if _tighten(p)]
    return changed


def _tighten(path: Path) -> bool:
    """Through an fd opened without following links: a symlink is never changed, nor what it names."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)) or info.st_uid != os.getuid():
            return False
        if not loose(info.st_mode):
            return False
        os.fchmod(fd, stat.S_IMODE(info.st_mode) & 0o700)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _walk(root: Path, skipped: set[str]) -> Iterable[Path]:
    for directory, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = [d for d in dirs if d not in skipped]
        for name in dirs + files:
            yield Path(directory) / name
