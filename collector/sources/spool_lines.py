"""Decode one spool line: the hook envelope ``{"ts","agent","event","payload"}``.

The hook script does not check the payload it appends (that check was the slow part of it): it writes
``{"ts":<n>,"agent":"<id>","event":"<name>","payload":`` + the input as it came + ``}``. So the line is
cut at that fixed prefix and only the payload is parsed. A payload that is not valid JSON is kept as
text (``payload`` null, ``payload_raw`` the text) and counted; it never costs the lines around it, and
a payload that happens to close the envelope early (``1,"agent":"x"``) cannot change its fields.
The agent's invocation attributes and trace context, when the hook found them in its environment, come
between the event and the payload (``"attributes"``, ``"traceparent"``: a string or false) and are kept
in the envelope as they are (``collector.pipeline.invocation`` checks them and stamps the session).
Lines in another layout (the daemon's own writer, an agent plugin that writes the spool) are parsed whole.
A line ``{..., "dropped": "<reason>"}`` is the hook saying it gave up on an event: counted, not a record.
As for every JSONL source (``collector.model.decode``), a BOM before the line is skipped and lone UTF-16
surrogate escapes in the payload become U+FFFD instead of costing the payload.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from collector.model.decode import BOM, loads
from collector.sources.jsonl_files import Decoded

PAYLOAD_INVALID = "hook_payload_invalid"
DROPPED = "hook_dropped"

_PREFIX = re.compile(
    rb'\{"ts":(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?),'
    rb'"agent":"([A-Za-z0-9._:-]+)",'
    rb'"event":(?:"([A-Za-z0-9._:-]*)"|null),'
    rb'((?:"(?:attributes|traceparent)":(?:"[^"\\\x00-\x1f]*"|false),)*)'  # the agent's context, if set
    rb'"payload":'
)
CONTEXT_KEYS = ("attributes", "traceparent")  # hook fields from the agent's environment (the hook's top)
_LEGACY_KEYS = {"ts", "agent", "event", "payload", "payload_raw"}  # the hook before it stopped checking


def decode_spool_line(line: bytes) -> Decoded:
    """``(envelope or None, counter to bump or None)``; raises ValueError for a line that is not ours."""
    if line.startswith(BOM):
        line = line[len(BOM):]
    end = len(line.rstrip())
    match = _PREFIX.match(line)
    if match is None or line[end - 1 : end] != b"}":
        return _whole(line)
    envelope: dict[str, Any] = {
        "ts": orjson.loads(match[1]),
        "agent": match[2].decode(),
        "event": None if match[3] is None else match[3].decode(),
    }
    if match[4]:  # only plain strings (no quote, backslash or control byte) or false: JSON as it stands
        envelope.update(orjson.loads(b"{" + match[4][:-1].decode("utf-8", "replace").encode() + b"}"))
    body = line[match.end() : end - 1].strip()
    if not body:
        envelope["payload"] = None
        return envelope, None
    try:
        envelope["payload"] = loads(body)
        return envelope, None
    except orjson.JSONDecodeError:
        pass
    legacy = _legacy(line)
    if legacy is not None:
        return legacy, PAYLOAD_INVALID
    envelope["payload"] = None
    envelope["payload_raw"] = body.decode("utf-8", "replace")
    return envelope, PAYLOAD_INVALID


def _whole(line: bytes) -> Decoded:
    data = loads(line)
    if isinstance(data, dict) and "dropped" in data and "payload" not in data:
        return None, DROPPED
    return data, None


def _legacy(line: bytes) -> dict[str, Any] | None:
    """``"payload":null,"payload_raw":"..."``, as the hook wrote invalid input until it stopped checking."""
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if isinstance(data, dict) and set(data) == _LEGACY_KEYS and data["payload"] is None:
        return data
    return None
