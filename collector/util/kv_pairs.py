"""``key1=value1,key2=value2``: the list form of ``OTEL_RESOURCE_ATTRIBUTES`` (and of
``OTEL_SPAN_ATTRIBUTES``, which LoongSuite Pilot reads the same way).

The form is the W3C Baggage header's (https://www.w3.org/TR/baggage/): members split on ``,``, each
``key=value`` with optional whitespace around both, a member's ``;properties`` ignored, the value
percent-decoded as UTF-8. The OpenTelemetry resource SDK says that on any error the whole variable is
discarded and the error reported
(https://opentelemetry.io/docs/specs/otel/resource/sdk/#specifying-resource-information-via-an-environment-variable):
``parse_pairs`` raises ``ValueError`` naming the first bad member (never its value).
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

MAX_TEXT = 64 * 1024
_KEY = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # a token (RFC 7230), as baggage keys are
_ESCAPES = re.compile(r"%(?![0-9A-Fa-f]{2})")


def parse_pairs(text: str) -> dict[str, str]:
    """The pairs of ``text`` in order (a later key replaces an earlier one); ValueError when any member
    is malformed: no ``=``, an empty or non-token key, a bad percent escape, a value not UTF-8."""
    if len(text) > MAX_TEXT:
        raise ValueError(f"longer than {MAX_TEXT} characters")
    pairs: dict[str, str] = {}
    for number, member in enumerate(text.split(","), 1):
        if not member.strip():
            if text.strip():
                continue  # an empty member (a trailing comma) is skipped, as baggage parsers do
            return {}
        key, sep, value = member.split(";", 1)[0].partition("=")
        key = key.strip()
        if not sep or not _KEY.match(key):
            raise ValueError(f"member {number} is not key=value with a plain key")
        pairs[key] = _decode(value.strip(), number)
    return pairs


def _decode(value: str, number: int) -> str:
    if _ESCAPES.search(value):
        raise ValueError(f"member {number}: a '%' that is not a percent escape")
    try:
        return unquote_to_bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"member {number}: the decoded value is not UTF-8") from None
