"""Checks of every path a plugin hands us, before we read or pass it on: absolute, no ``.`` or ``..``
component, no NUL or newline, inside the session directory the plugin itself reported (after symlinks are
resolved), and a regular file."""

from __future__ import annotations

import os
import stat


class PathRefused(ValueError):
    """A plugin's path that we do not read."""


def checked_dir(path: object) -> str:
    if not isinstance(path, str) or not path:
        raise PathRefused("the session directory is not a path")
    _plain(path, "session directory")
    return path


def checked_file(path: object, session_dir: str) -> str:
    if not isinstance(path, str) or not path:
        raise PathRefused("the session file is not a path")
    _plain(path, "session file")
    real, root = os.path.realpath(path), os.path.realpath(session_dir)
    if os.path.commonpath([real, root]) != root or real == root:
        raise PathRefused(f"session file {path!r} is outside the session directory {session_dir!r}")
    try:
        mode = os.stat(real).st_mode
    except OSError as exc:
        raise PathRefused(f"session file {path!r}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise PathRefused(f"session file {path!r} is not a regular file")
    return real


def _plain(path: str, what: str) -> None:
    if "\0" in path or "\n" in path or "\r" in path:
        raise PathRefused(f"{what} holds a control character")
    if not os.path.isabs(path):
        raise PathRefused(f"{what} {path!r} is not absolute")
    if any(part in (".", "..") for part in path.split(os.sep)):
        raise PathRefused(f"{what} {path!r} has a '.' or '..' component")
