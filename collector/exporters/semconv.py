"""Which GenAI semantic-convention names the OTLP exporters send: the released ones (semantic-conventions
v1.41.0, the last core release that documents GenAI) by default, the latest experimental ones of the
``open-telemetry/semantic-conventions-genai`` repository under ``OTEL_SEMCONV_STABILITY_OPT_IN`` =
``gen_ai_latest_experimental``, both under ``gen_ai_latest_experimental/dup`` (docs/otlp.md lists both sets).

The variable is a comma-separated list shared with other domains (``http``, ``database``, ...): only the two
GenAI values mean anything here; the others, unknown values and a value longer than ``MAX_CHARS`` are
ignored. ``/dup`` wins when both are named. Every ``gen_ai.*`` name that differs between the two sets is in
this module."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

log = logging.getLogger(__name__)

ENV = "OTEL_SEMCONV_STABILITY_OPT_IN"
LATEST = "gen_ai_latest_experimental"
DUP = "gen_ai_latest_experimental/dup"
MAX_CHARS = 4096
RELEASED_VERSION = "semantic-conventions v1.41.0"
# the genai repository has no tagged release: the commits of the migration guide and token metrics followed
LATEST_VERSION = "semantic-conventions-genai main (migration.md @ 32c328e, gen-ai-token-metrics.md @ 066d4a7)"

# span and log attributes renamed (migration guide, "Inference span and event attributes", PR #440)
RENAMED = {"gen_ai.usage.cache_creation.input_tokens": "gen_ai.usage.cache_write.input_tokens"}
# attributes the latest conventions remove from the internal invoke_agent span (PRs #242, #322, #289, #469)
AGENT_SPAN_REMOVED = ("gen_ai.agent.id", "gen_ai.agent.version", "gen_ai.provider.name",
                      "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_creation.input_tokens")

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Semconv:
    released: bool = True  # send the v1.41 names
    latest: bool = False  # send the latest experimental names

    @property
    def name(self) -> str:
        return DUP if self.released and self.latest else LATEST if self.latest else "default"


DEFAULT = Semconv()


def from_env(value: object) -> Semconv:
    """The names ``OTEL_SEMCONV_STABILITY_OPT_IN`` asks for (anything but a short string: the default)."""
    if not isinstance(value, str) or not value.strip():
        return DEFAULT
    if len(value) > MAX_CHARS:
        log.warning("%s is %d characters long (at most %d): ignored", ENV, len(value), MAX_CHARS)
        return DEFAULT
    options = {part.strip().lower() for part in value.split(",")}
    if DUP in options:
        return Semconv(released=True, latest=True)
    if LATEST in options:
        return Semconv(released=False, latest=True)
    return DEFAULT


def attributes(attrs: Mapping[str, V], mode: Semconv) -> dict[str, V]:
    """Span or log attributes under ``mode``: a renamed attribute under its new name (and its old one too with
    ``/dup``). The default gives ``attrs`` back as they are."""
    if not mode.latest or not any(old in attrs for old in RENAMED):
        return attrs if isinstance(attrs, dict) else dict(attrs)
    out: dict[str, V] = {}
    for key, value in attrs.items():
        new = RENAMED.get(key)
        if new is None:
            out[key] = value
            continue
        if mode.released:
            out[key] = value
        out[new] = value
    return out


def agent_span_attributes(attrs: Mapping[str, V], mode: Semconv) -> dict[str, V]:
    """An internal ``invoke_agent`` span's attributes: with the latest names only, those the latest conventions
    removed from it are left out (``/dup`` keeps them: the released set has them)."""
    renamed = attributes(attrs, mode)
    if mode.released:
        return renamed
    return {k: v for k, v in renamed.items() if k not in AGENT_SPAN_REMOVED}
