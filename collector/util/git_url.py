"""One form for a repository's remote URL, whatever form ``git remote add`` was given.

``git@github.com:acme/app.git``, ``ssh://git@github.com:22/acme/app``, ``git://github.com/acme/app.git``
and ``https://user:token@GitHub.com/acme/app.git/`` are one repository: each becomes
``https://github.com/acme/app``. Credentials (a user, a password, a token before ``@``), a query and a
fragment never survive; the host is lower-cased; ``.git`` and trailing slashes go; an https port other
than 443 stays (an ssh port says nothing about the web address). A local path or ``file://`` URL is kept as
a path. Anything else that is not a plausible URL (control characters, longer than ``MAX_URL``) is None.
Forms: the "GIT URLS" section of https://git-scm.com/docs/git-clone.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

MAX_URL = 2048
_SCP = re.compile(r"^(?:[^@/\s]+@)?(?P<host>[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\]):(?P<path>(?!//)[^\s]*)$")
_HOST = re.compile(r"^[a-z0-9.\-]+$|^\[[0-9a-f:.]+\]$")
_REMOTE_SCHEMES = {"https", "http", "ssh", "git", "git+ssh", "ssh+git"}


def normalise(url: str) -> str | None:
    """The one form of ``url`` (see the module), or None when it is no repository address."""
    text = url.strip()
    if not text or len(text) > MAX_URL or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        return None
    if "://" in text:
        return _from_url(text)
    if text.startswith(("/", ".", "~")) or re.match(r"^[A-Za-z]:[\\/]", text):
        return text.rstrip("/") or "/"
    scp = _SCP.match(text)
    if scp is None:
        return None
    return _web(scp["host"], None, scp["path"])


def repository_name(url: str) -> str | None:
    """The last part of a normalised URL: ``app`` of ``https://github.com/acme/app``."""
    name = url.rstrip("/").rsplit("/", 1)[-1]
    name = name[:-4] if name.endswith(".git") else name
    return name or None


def _from_url(text: str) -> str | None:
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme == "file":
        return parts.path.rstrip("/") or None
    if scheme not in _REMOTE_SCHEMES or not parts.hostname:
        return None
    keep_port = port if scheme == "https" and port not in (None, 443) else None
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    return _web(host, keep_port, parts.path)


def _web(host: str, port: int | None, path: str) -> str | None:
    host = host.lower()
    if not _HOST.match(host):
        return None
    path = path.strip("/")
    while path.endswith(".git") or path.endswith("/"):
        path = path[:-4] if path.endswith(".git") else path[:-1]
    if path.startswith("~"):  # ssh's home-relative form (``host:~user/repo``) has no web address of its own
        path = path[1:]
    where = f"{host}:{port}" if port else host
    return f"https://{where}/{path}" if path else f"https://{where}"
