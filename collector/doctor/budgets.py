"""The doctor's budget check: the limits the daemon last found at ``warn`` or ``over`` (status.json's
``budget``, written by ``collector.daemon.budget_watch``)."""

from __future__ import annotations

from typing import Any

from collector.doctor.model import Finding, error, ok, warn

FIX = "raise the limit or wait for its period to end ([budget] in config.toml, docs/budgets.md)"


def check_budget(status: dict[str, Any]) -> Finding:
    budget = status.get("budget") if isinstance(status, dict) else None
    if not isinstance(budget, dict) or not budget.get("limits"):
        return ok("budget", "no spend limits configured")
    crossed = [c for c in budget.get("crossed") or [] if isinstance(c, dict)]
    if not crossed:
        return ok("budget", f"{budget['limits']} limits, none reached")
    text = ", ".join(f"{c.get('name')} {c.get('level')} ({float(c.get('fraction') or 0):.0%})" for c in crossed)
    if any(c.get("level") == "over" and c.get("hard") for c in crossed):
        return error("budget", f"a hard limit is over, prompts are refused: {text}", FIX)
    return warn("budget", f"limits reached: {text}", FIX)
