"""Secret masking: every string that can carry content is scanned and secrets are replaced by
``[REDACTED:<kind>]``. On by default. Identifiers (event, session, tool-call ids) are never touched."""

from __future__ import annotations

import re
from typing import Any

# (kind, pattern, group to replace or 0 for the whole match)
_RULES: tuple[tuple[str, str, int], ...] = (
    ("private_key", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", 0),
    ("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA|AROA|AIDA)[0-9A-Z]{16}\b", 0),
    (
        "aws_secret_key",
        r"(?i)(?:aws_?secret_?access_?key|aws_?secret|secret_?access_?key)[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9/+=]{30,})",
        1,
    ),
    ("gcp_api_key", r"\bAIza[0-9A-Za-z_\-]{35}\b", 0),
    ("gcp_oauth_token", r"\bya29\.[0-9A-Za-z_\-]{20,}", 0),
    ("azure_key", r"(?i)\b(?:AccountKey|SharedAccessKey|SharedAccessSignature)=([A-Za-z0-9+/=%]{20,})", 1),
    ("azure_client_secret", r"\b[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}\b", 0),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}", 0),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}", 0),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})", 0),
    ("gitlab_token", r"\bgl(?:pat|dt|ptt|rt|cbt|soat|ffct|agent)-[A-Za-z0-9_\-]{20,}", 0),
    ("slack_token", r"\bxox[abposrce]-[A-Za-z0-9\-]{10,}", 0),
    ("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]+", 0),
    ("stripe_key", r"\b(?:sk|rk|pk|whsec)_(?:live|test)_[A-Za-z0-9]{16,}", 0),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}", 0),
    ("bearer_token", r"(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{8,}=*)", 1),
    ("url_password", r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/\s@\"']+:([^@\s/\"']+)@", 1),
    (
        "password",
        r"(?i)\b(?:password|passwd|pwd|passphrase|secret|client_secret|api_?key|apikey|access_?token|auth_?token)"
        r"[\"']?\s*[:=]\s*[\"']?([^\s\"',;&]{3,})",
        1,
    ),
)



def _scoped(pattern: str) -> str:
    """``(?i)x`` -> ``(?i:x)`` so the rules can be joined into one expression."""
    return f"(?i:{pattern[4:]})" if pattern.startswith("(?i)") else pattern


_COMBINED = re.compile("|".join(f"(?P<r{i}>{_scoped(p)})" for i, (_, p, _) in enumerate(_RULES)))
_SUB = [(kind, re.compile(pattern), group) for kind, pattern, group in _RULES]

# Keys whose values are identifiers or enums we produce, never content.
STRUCTURAL_KEYS = frozenset(
    {
        "schema.version",
        "event.id",
        "event.name",
        "gen_ai.agent.type",
        "gen_ai.session.id",
        "gen_ai.turn.id",
        "turn.key",
        "turn.ends",
        "gen_ai.tool.call.id",
        "gen_ai.response.id",
        "gen_ai.request.id",
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "source.kind",
        "tool.result.status",
        "session.status",
        "session.previous_status",
        "agent.hook_event_name",
    }
)


def _replace(match: re.Match[str]) -> str:
    index = int(match.lastgroup[1:]) if match.lastgroup else 0
    kind, pattern, group = _SUB[index]
    if group == 0:
        return f"[REDACTED:{kind}]"
    inner = pattern.match(match.group(0))
    if inner is None or inner.group(group) is None:
        return f"[REDACTED:{kind}]"
    text = match.group(0)
    start, end = inner.span(group)
    return f"{text[:start]}[REDACTED:{kind}]{text[end:]}"


def mask_text(text: str) -> str:
    return _COMBINED.sub(_replace, text)


def mask_value(value: Any) -> Any:
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, list):
        return [mask_value(v) for v in value]
    if isinstance(value, dict):
        return {k: mask_value(v) for k, v in value.items()}
    return value


def mask_entry(entry: dict[str, Any]) -> dict[str, Any]:
    for key, value in entry.items():
        if key not in STRUCTURAL_KEYS and isinstance(value, (str, list, dict)):
            entry[key] = mask_value(value)
    return entry
