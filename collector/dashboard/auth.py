"""Who may read the dashboard: a browser tab that redeemed a one-time login code.

* ``agent-collector dashboard`` makes a code (24 random bytes) and keeps only its SHA-256 with an
  expiry, :data:`CODE_TTL_S` from now, in ``<state dir>/dashboard-login`` (0600). The link it prints
  carries the code in the URL *fragment* (``/dashboard/#code=...``), which a browser never sends to
  any server nor puts in a Referer.
* The page posts the code once (``POST /dashboard/session``, header :data:`LOGIN_HEADER`); the daemon
  deletes the file and answers a dashboard token that lives :data:`SESSION_TTL_S` in the daemon's memory
  only. The page keeps it in ``sessionStorage`` (its own origin and tab) and sends it as
  :data:`SESSION_HEADER` to ``/v1/usage``. No cookie: nothing the browser attaches on its own, so no
  other server on 127.0.0.1 (cookies are not scoped by port) ever receives a credential.
* A dashboard token reads ``/v1/usage`` and nothing else; the ingest token is never in a browser.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from collector.paths import Paths
from collector.util.private import FILE_MODE, open_private

CODE_TTL_S = 120.0
SESSION_TTL_S = 12 * 3600.0
MAX_SESSIONS = 32
LOGIN_HEADER = "X-Agent-Collector-Login"
SESSION_HEADER = "X-Agent-Collector-Dashboard"
LOGIN_FILE = "dashboard-login"


def login_file(paths: Paths) -> Path:
    return paths.state_dir / LOGIN_FILE


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.strip().encode("utf-8", "replace")).hexdigest()


def issue_code(paths: Paths, now: float | None = None) -> str:
    """A new one-time login code (any earlier one stops working); only its hash is written."""
    from collector.util.atomic import atomic_write

    code = secrets.token_urlsafe(24)
    expires = (time.time() if now is None else now) + CODE_TTL_S
    record = {"sha256": _digest(code), "expires_unix": expires}
    atomic_write(login_file(paths), orjson.dumps(record), mode=FILE_MODE)
    return code


def _pending(path: Path) -> tuple[str, float] | None:
    try:
        fd = open_private(path, os.O_RDONLY)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        raw = f.read(4096)
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict):
        return None
    digest, expires = record.get("sha256"), record.get("expires_unix")
    if not isinstance(digest, str) or not isinstance(expires, (int, float)) or isinstance(expires, bool):
        return None
    return digest, float(expires)


def redeem_code(paths: Paths, code: str | None, now: float | None = None) -> bool:
    """True once for the pending code while it is fresh; the file is removed then (single use) and
    also when it has expired."""
    if not code:
        return False
    path = login_file(paths)
    pending = _pending(path)
    if pending is None:
        return False
    digest, expires = pending
    moment = time.time() if now is None else now
    if moment > expires:
        path.unlink(missing_ok=True)
        return False
    if not hmac.compare_digest(digest, _digest(code)):
        return False
    try:
        path.unlink()  # two tabs racing with one code: only the one that removes the file wins
    except FileNotFoundError:
        return False
    return True


@dataclass
class DashboardSessions:
    """The dashboard tokens granted since the daemon started (their hashes and expiry), in memory only:
    a restart logs every tab out."""

    ttl_s: float = SESSION_TTL_S
    clock: Callable[[], float] = time.time
    _expiry: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def grant(self) -> tuple[str, float]:
        token = secrets.token_urlsafe(32)
        now = self.clock()
        with self._lock:
            self._drop_expired(now)
            while len(self._expiry) >= MAX_SESSIONS:
                del self._expiry[min(self._expiry, key=self._expiry.__getitem__)]
            self._expiry[_digest(token)] = now + self.ttl_s
        return token, self.ttl_s

    def valid(self, token: str | None) -> bool:
        if not token:
            return False
        digest = _digest(token)
        now = self.clock()
        with self._lock:
            expires = self._expiry.get(digest)
            if expires is None:
                return False
            if now > expires:
                del self._expiry[digest]
                return False
        return True

    def _drop_expired(self, now: float) -> None:
        for digest in [d for d, t in self._expiry.items() if now > t]:
            del self._expiry[digest]
