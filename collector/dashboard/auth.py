"""Who may read the dashboard: whoever holds the per-user ingest secret (``<state dir>/ingest.token``,
kept by ``collector.ingest.secret``). ``agent-collector dashboard`` prints a one-time login URL with it;
the daemon answers that URL with an HttpOnly, SameSite=Strict cookie and a redirect, so the secret
leaves the address bar at once and no other site's page can send it."""

from __future__ import annotations

import hmac

from collector.ingest.secret import ensure_token, read_token

__all__ = ["COOKIE", "COOKIE_MAX_AGE", "cookie_value", "ensure_token", "read_token", "same", "set_cookie"]

COOKIE = "agent_collector_dashboard"
COOKIE_MAX_AGE = 30 * 86400


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
