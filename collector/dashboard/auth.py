"""Who may read the dashboard: whoever holds the per-user ingest secret (``<state dir>/ingest.token``,
kept and compared by ``collector.ingest.secret``). ``agent-collector dashboard`` prints a one-time login URL with it;
the daemon answers that URL with an HttpOnly, SameSite=Strict cookie and a redirect, so the secret
leaves the address bar at once and no other site's page can send it."""

from __future__ import annotations

COOKIE = "agent_collector_dashboard"
COOKIE_MAX_AGE = 30 * 86400


def cookie_value(header: str | None) -> str | None:
    for part in (header or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


def set_cookie(token: str) -> str:
    return f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={COOKIE_MAX_AGE}"
