"""Who may read the dashboard: whoever holds the per-user secret in ``<state dir>/ingest.token`` (0600,
32 random bytes hex; made here when missing). ``agent-collector dashboard`` prints a one-time login URL
with it; the daemon answers that URL with an HttpOnly, SameSite=Strict cookie and a redirect, so the
secret leaves the address bar at once and no other site's page can send it."""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
from pathlib import Path

from collector.paths import Paths

COOKIE = "agent_collector_dashboard"
COOKIE_MAX_AGE = 30 * 86400


def token_file(paths: Paths) -> Path:
    return Path(getattr(paths, "ingest_token_file", paths.state_dir / "ingest.token"))


def ensure_token(paths: Paths) -> str:
    """The secret, created (0600, exclusively) when there is none yet."""
    path = token_file(paths)
    with contextlib.suppress(OSError):
        existing = path.read_text().strip()
        if existing:
            return existing
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_hex(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def read_token(paths: Paths) -> str | None:
    try:
        return token_file(paths).read_text().strip() or None
    except OSError:
        return None


def same(a: str | None, b: str | None) -> bool:
    return bool(a) and bool(b) and hmac.compare_digest(str(a).encode(), str(b).encode())


def cookie_value(header: str | None) -> str | None:
    for part in (header or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


def set_cookie(token: str) -> str:
    return f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={COOKIE_MAX_AGE}"
