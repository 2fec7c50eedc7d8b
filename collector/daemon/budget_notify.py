"""Telling the user a budget crossed a threshold, besides the ``budget.threshold`` entry: a desktop
notification where ``notify-send`` exists (never required) and a POST of the entry to the webhook the user
configured (``budget.webhook``). Both run on a short-lived thread with a time cap: the worker never waits
on them, and a failure is logged, never raised."""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
import urllib.request
from collections.abc import Sequence
from typing import Any

import orjson

log = logging.getLogger("collector")
TIMEOUT_S = 5.0


def message(entry: dict[str, Any]) -> str:
    """One line naming the budget, e.g. "budget 'daily' (day): $12.40 of $10.00 spent (124%)"."""
    unit, amount, spent = entry["budget.unit"], entry["budget.amount"], entry["budget.spent"]
    fmt = (lambda v: f"${v:,.2f}") if unit == "usd" else (lambda v: f"{int(v):,} tokens")
    where = f" for session {entry['gen_ai.session.id']}" if entry.get("gen_ai.session.id") else ""
    word = "reached" if entry["budget.level"] == "over" else "nearly reached"
    return (f"budget '{entry['budget.name']}' ({entry['budget.period']}{where}) {word}: {fmt(spent)} of "
            f"{fmt(amount)} spent ({entry['budget.fraction']:.0%})")


def announce(entries: Sequence[dict[str, Any]], webhook: str, desktop: bool) -> threading.Thread | None:
    """Notify about ``entries`` (fresh ``budget.threshold`` entries) on a daemon thread; returns it."""
    if not entries or (not webhook and not desktop):
        return None
    thread = threading.Thread(target=_send, args=(list(entries), webhook, desktop), name="budget-notify",
                              daemon=True)
    thread.start()
    return thread


def _send(entries: list[dict[str, Any]], webhook: str, desktop: bool) -> None:
    notifier = shutil.which("notify-send") if desktop else None
    for entry in entries:
        text = message(entry)
        log.warning("%s", text)
        if notifier:
            try:
                subprocess.run([notifier, "--app-name=agent-collector", "agent-collector", text],
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT_S, check=False)
            except (OSError, subprocess.SubprocessError) as exc:
                log.info("notify-send failed: %s", exc)
        if webhook:
            post(webhook, entry)


def post(url: str, entry: dict[str, Any]) -> None:
    request = urllib.request.Request(url, data=orjson.dumps({"text": message(entry), "entry": entry}),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310 - http(s) by schema
            response.read(1024)
    except (OSError, ValueError) as exc:
        log.warning("budget webhook %s failed: %s", url, exc)
