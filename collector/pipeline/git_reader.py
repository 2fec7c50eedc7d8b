"""What a working tree's ``.git`` says, read from its files, without running ``git``.

``read_repository(root)`` follows the layout of https://git-scm.com/docs/gitrepository-layout: ``.git`` is
the repository directory, or a file ``gitdir: <path>`` (a linked worktree, ``git worktree add``, or a
submodule); a linked worktree's directory names the shared one in ``commondir``. ``HEAD`` is
``ref: refs/heads/<branch>`` (a branch, possibly without a commit yet) or a commit id (detached); the
branch's commit is the loose ref file in the common directory, else its line in ``packed-refs``; the
remote is the branch's ``branch.<name>.remote``, else ``origin``, else the first ``[remote]`` of
``config`` (https://git-scm.com/docs/git-config, "CONFIGURATION FILE").

Everything in ``.git`` may be written by anyone: each file is opened only if it is a regular file (a FIFO
cannot block), read up to a bound, decoded leniently; a ref name with ``..``, a control character or an
absolute path is not followed; symbolic refs are followed at most ``MAX_HOPS`` times. A file that cannot
be used leaves its fact out; nothing here raises on the repository's content.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from collector.util.git_url import normalise
from collector.util.regular import read_regular

HEAD_BYTES = 4096
CONFIG_BYTES = 256 * 1024
PACKED_BYTES = 16 * 1024 * 1024
MAX_HOPS = 5
MAX_REF = 1024
_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_SECTION = re.compile(r'^\[\s*([A-Za-z0-9.\-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]')


@dataclass(frozen=True, slots=True)
class Repository:
    """The facts of one working tree; None where the files do not say."""

    worktree: str  # the working tree's top directory
    linked: bool  # a worktree made by ``git worktree add`` (not the repository's main one)
    branch: str | None  # None: detached HEAD
    revision: str | None  # None: a branch without a commit yet
    remote_url: str | None  # normalised (collector.util.git_url), no credentials


@dataclass(frozen=True, slots=True)
class GitDirs:
    gitdir: str  # HEAD lives here
    common: str  # config, refs and packed-refs live here

    @property
    def linked(self) -> bool:
        return os.path.normpath(self.gitdir) != os.path.normpath(self.common)


def find_dirs(root: str) -> GitDirs | None:
    """The repository directories of the working tree at ``root`` (which holds ``.git``), or None."""
    dot = os.path.join(root, ".git")
    if os.path.isdir(dot):
        gitdir = dot
    else:
        text = _text(dot, HEAD_BYTES)
        if text is None or not text.startswith("gitdir:"):
            return None
        target = text[len("gitdir:"):].strip()
        if not target or "\0" in target:
            return None
        gitdir = os.path.normpath(os.path.join(root, target))
        if not os.path.isdir(gitdir):
            return None
    common = gitdir
    pointer = _text(os.path.join(gitdir, "commondir"), HEAD_BYTES)
    if pointer is not None and pointer.strip() and "\0" not in pointer:
        candidate = os.path.normpath(os.path.join(gitdir, pointer.strip()))
        if os.path.isdir(candidate):
            common = candidate
    return GitDirs(gitdir, common)


def read_repository(root: str) -> Repository | None:
    """The facts of the working tree at ``root``, or None when it has no usable ``.git``."""
    dirs = find_dirs(root)
    if dirs is None:
        return None
    head = _text(os.path.join(dirs.gitdir, "HEAD"), HEAD_BYTES)
    branch, revision = _head(dirs, head.strip() if head else "")
    config = _text(os.path.join(dirs.common, "config"), CONFIG_BYTES) or ""
    return Repository(root, dirs.linked, branch, revision, remote_url(config, branch))


def head_files(dirs: GitDirs, branch: str | None) -> tuple[str, ...]:
    """The files whose change can change the facts: HEAD, the branch's loose ref, packed-refs, config."""
    files = [os.path.join(dirs.gitdir, "HEAD"), os.path.join(dirs.common, "packed-refs"),
             os.path.join(dirs.common, "config")]
    if branch is not None:
        files.append(os.path.join(dirs.common, "refs", "heads", *branch.split("/")))
    return tuple(files)


def _head(dirs: GitDirs, head: str) -> tuple[str | None, str | None]:
    if _SHA.match(head):
        return None, head
    if not head.startswith("ref:"):
        return None, None
    ref = head[4:].strip()
    if not _safe_ref(ref):
        return None, None
    branch = ref[len("refs/heads/"):] if ref.startswith("refs/heads/") else None
    return branch, _resolve(dirs, ref)


def _resolve(dirs: GitDirs, ref: str) -> str | None:
    for _ in range(MAX_HOPS):
        text = _text(os.path.join(dirs.common, *ref.split("/")), HEAD_BYTES)
        if text is None:
            return _packed(dirs.common, ref)
        value = text.strip()
        if _SHA.match(value):
            return value
        if not value.startswith("ref:") or not _safe_ref(value[4:].strip()):
            return None
        ref = value[4:].strip()
    return None


def _packed(common: str, ref: str) -> str | None:
    data = read_regular(os.path.join(common, "packed-refs"), PACKED_BYTES)
    if not data:
        return None
    wanted = b" " + ref.encode("utf-8", "surrogateescape") + b"\n"
    at = (data if data.endswith(b"\n") else data + b"\n").find(wanted)
    if at < 0:
        return None
    start = data.rfind(b"\n", 0, at) + 1
    sha = data[start:at].decode("ascii", "replace")
    return sha if _SHA.match(sha) else None


def _safe_ref(ref: str) -> bool:
    """A name under ``refs/`` that stays under it (the rules of git-check-ref-format that matter here)."""
    if not ref.startswith("refs/") or len(ref) > MAX_REF or "\\" in ref:
        return False
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in ref):
        return False
    return all(part not in ("", ".", "..") for part in ref.split("/"))


def remote_url(config: str, branch: str | None) -> str | None:
    """The normalised URL of the branch's remote, else ``origin``'s, else the first remote's."""
    urls: dict[str, str] = {}
    branch_remote: str | None = None
    section: tuple[str, str | None] = ("", None)
    for raw in config.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            found = _SECTION.match(line)
            section = (found[1].lower(), found[2]) if found else ("", None)
            continue
        key, _, value = line.partition("=")
        key, value = key.strip().lower(), _value(value)
        if section[0] == "remote" and section[1] is not None and key == "url":
            urls.setdefault(section[1], value)
        elif section == ("branch", branch) and key == "remote":
            branch_remote = value
    name = branch_remote if branch_remote in urls else "origin" if "origin" in urls else next(iter(urls), None)
    return normalise(urls[name]) if name is not None else None


def _value(text: str) -> str:
    """A config value: quotes removed, a comment after an unquoted ``#`` or ``;`` cut."""
    out, quoted = [], False
    for char in text.strip():
        if char == '"':
            quoted = not quoted
        elif char in "#;" and not quoted:
            break
        else:
            out.append(char)
    return "".join(out).strip()


def _text(path: str, limit: int) -> str | None:
    data = read_regular(path, limit)
    return None if data is None else data.decode("utf-8", "replace")
