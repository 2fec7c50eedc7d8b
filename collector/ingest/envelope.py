"""Turn an http hook body into the spool's envelope, so both paths feed the same parser and dedupe."""

from __future__ import annotations

from typing import Any

import orjson


def to_envelope(agent: str, body: bytes, received: float) -> dict[str, Any]:
    """``{"ts", "agent", "event", "payload"}``, exactly what the hook script appends to the spool.

    The server has already checked that ``body`` is a JSON object and, for ``?event=``, named the event
    in ``hook_event_name`` when the payload did not.
    """
    payload = orjson.loads(body)
    event = payload.get("hook_event_name") if isinstance(payload, dict) else None
    return {"ts": received, "agent": agent, "event": event if isinstance(event, str) else None,
            "payload": payload}
