"""Gemini CLI's project of a chat log, through Gemini's own project index.

Chat logs live in ``<gemini home>/tmp/<project>/chats/``, where ``<project>`` is a short name (0.61:
``work``) or, in older versions, the SHA-256 of the working directory. Gemini writes the directory itself
to ``<gemini home>/tmp/<project>/.project_root`` and maps it in ``<gemini home>/projects.json``
(``{"projects": {"<abs path>": "<short name>"}}``). The first that answers gives ``workspace.path``.
Read once per project folder and version of those files (cached).
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import PurePosixPath

import orjson

from collector.util.regular import read_regular

MAX_BYTES = 1024 * 1024


def project_of(chat_path: str) -> str | None:
    """The working directory of the project a chat log (or a sub-agent's log under it) belongs to."""
    parts = PurePosixPath(chat_path).parts
    if "chats" not in parts:
        return None
    at = len(parts) - 1 - parts[::-1].index("chats")  # the last "chats" folder
    if at < 3 or parts[at - 2] != "tmp":
        return None
    folder = str(PurePosixPath(*parts[:at]))
    gemini_home = str(PurePosixPath(*parts[:at - 2]))
    index = os.path.join(gemini_home, "projects.json")
    return _resolved(folder, index, _version(os.path.join(folder, ".project_root")), _version(index))


def _version(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=256)
def _resolved(folder: str, index: str, root_version: tuple[int, int] | None,
              index_version: tuple[int, int] | None) -> str | None:
    if root_version is not None:
        root = _read(os.path.join(folder, ".project_root")).decode(errors="replace").strip()
        if root.startswith("/"):
            return root
    if index_version is None:
        return None
    try:
        projects = orjson.loads(_read(index)).get("projects")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    name = os.path.basename(folder)
    for path, short in projects.items() if isinstance(projects, dict) else ():
        if isinstance(path, str) and (short == name or hashlib.sha256(path.encode()).hexdigest() == name):
            return path
    return None


def _read(path: str) -> bytes:
    """At most MAX_BYTES of a regular file (a FIFO or a directory put there is read as empty, never waited on)."""
    return read_regular(path, MAX_BYTES) or b""
