"""The status line's text: from the agent's status-line payload (Claude Code's JSON on stdin) and the
daemon's ``spend.json`` (``collector.daemon.budget_watch``), one line of fields; docs/budgets.md."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

DEFAULT_FORMAT = "{session} session | {today} today | {block} | {budget}"
FIELDS = ("session", "today", "block", "budget", "model", "cwd")
STALE_S = 300  # a cache older than this is shown with its time (the daemon is not running)


def _usd(value: Any) -> str:
    return f"${value:,.2f}" if isinstance(value, int | float) and not isinstance(value, bool) else "$?"


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, Mapping) else None
    return data


def session_cost(payload: Mapping[str, Any], spend: Mapping[str, Any]) -> float | None:
    """The agent's own figure (``cost.total_cost_usd``), else ours for the session id (today's part)."""
    own = _dig(payload, "cost", "total_cost_usd")
    if isinstance(own, int | float) and not isinstance(own, bool) and own >= 0:
        return float(own)
    sid = payload.get("session_id")
    sessions = spend.get("sessions")
    if isinstance(sid, str) and sid and isinstance(sessions, Mapping):
        for key, value in sessions.items():
            if isinstance(key, str) and key.endswith(f" {sid}") and isinstance(value, int | float):
                return float(value)
    return None


def block_text(block: Any, now: float) -> str:
    if not isinstance(block, Mapping) or not isinstance(block.get("end_unix"), int | float):
        return "no block"
    left = int(block["end_unix"] - now)
    if left <= 0:
        return "no block"
    return f"block {left // 3600}h{left % 3600 // 60:02d}m left ({_usd(block.get('usd'))})"


def budget_text(budgets: Any) -> str:
    """The worst limit: ``OVER daily 103%``, ``budget daily 81%``, ``budget ok``; empty with no limits."""
    if not isinstance(budgets, list) or not budgets:
        return ""
    rank = {"ok": 0, "warn": 1, "over": 2}
    items = [b for b in budgets if isinstance(b, Mapping) and b.get("level") in rank]
    if not items:
        return ""
    worst = max(items, key=lambda b: (rank[b["level"]], b.get("fraction") or 0))
    if worst["level"] == "ok":
        return "budget ok"
    word = "OVER" if worst["level"] == "over" else "budget"
    return f"{word} {worst.get('name')} {float(worst.get('fraction') or 0):.0%}"


def values(payload: Mapping[str, Any], spend: Mapping[str, Any], now: float) -> dict[str, Any]:
    """Every field of the line, as data (``statusline --json``)."""
    updated = spend.get("updated")
    cost = session_cost(payload, spend)
    return {
        "session": "$?" if cost is None else _usd(cost), "session_usd": cost,
        "today": _usd(_dig(spend, "today", "usd")), "today_usd": _dig(spend, "today", "usd"),
        "block": block_text(spend.get("block"), now), "budget": budget_text(spend.get("budgets")),
        "model": str(_dig(payload, "model", "display_name") or _dig(payload, "model", "id") or ""),
        "cwd": str(_dig(payload, "workspace", "current_dir") or payload.get("cwd") or ""),
        "updated": updated,
        "stale": not isinstance(updated, int | float) or now - updated > STALE_S,
    }


def line(payload: Mapping[str, Any], spend: Mapping[str, Any] | None, fmt: str = DEFAULT_FORMAT,
         now: float | None = None) -> str:
    """The one line. ``fmt`` names fields in braces (``FIELDS``); an unknown name stays as written."""
    if spend is None:
        return "agent-collector: no data yet"
    now = time.time() if now is None else now
    got = values(payload, spend, now)
    text = fmt
    for name in FIELDS:
        text = text.replace("{" + name + "}", str(got[name]))
    text = " | ".join(part for part in (p.strip() for p in text.split(" | ")) if part)
    if got["stale"] and isinstance(got["updated"], int | float):
        text += time.strftime(" (as of %H:%M)", time.localtime(got["updated"]))
    return text
