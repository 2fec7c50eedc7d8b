"""The second offline price table: LiteLLM's price data (what ccusage and agentsview use), for the models
genai-prices lacks. A pinned, trimmed copy ships in ``collector/data/litellm-prices.json`` (its source and
date are in the file; ``scripts/refresh_litellm_prices.py`` rewrites it); never a network call.

Look-up: the model name as a key, else a ``<provider>/<model>`` key ending in ``/<model>`` (the one of our
provider first, then the shortest key, then the first in order). ``tiered_pricing`` ranges are over a
call's input tokens: a call whose input exceeds a range's start pays that range's rates for all its
tokens, which is the long-context band model of ``PriceTable``."""

from __future__ import annotations

import json
from decimal import Decimal
from importlib import resources
from typing import Any

from collector.usage.rates import Rates

SOURCE = "litellm"
FILE = "litellm-prices.json"
# our gen_ai.provider.name -> LiteLLM's litellm_provider
PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "azure.ai.openai": "azure", "gcp.gemini": "gemini",
             "gcp.vertex_ai": "vertex_ai", "aws.bedrock": "bedrock", "deepseek": "deepseek",
             "mistral_ai": "mistral", "x_ai": "xai", "groq": "groq", "openrouter": "openrouter",
             "dashscope": "dashscope", "qwen": "dashscope", "alibaba": "dashscope"}


def _dec(value: Any) -> Decimal:
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


class LiteLLMPrices:
    """The vendored table, read on first use."""

    def __init__(self) -> None:
        self._doc: dict[str, Any] | None = None
        self._by_suffix: dict[str, list[str]] = {}

    def _models(self) -> dict[str, Any]:
        if self._doc is None:
            try:
                raw = resources.files("collector").joinpath("data", FILE).read_bytes()
                self._doc = json.loads(raw)
            except (OSError, ValueError):
                self._doc = {"models": {}, "version": "none"}
            for key in self._doc["models"]:
                if "/" in key:
                    self._by_suffix.setdefault(key.rsplit("/", 1)[1], []).append(key)
        models: dict[str, Any] = self._doc["models"]
        return models

    @property
    def version(self) -> str:
        """The table's version, from its first line (the refresh script writes the header there), so a
        report whose rates are all cached never parses the whole table."""
        if self._doc is None:
            try:
                with resources.files("collector").joinpath("data", FILE).open("rb") as f:
                    head = json.loads(f.readline().rstrip() + b"}}")
                return str(head["version"])
            except (OSError, ValueError, KeyError, TypeError):
                pass
        self._models()
        assert self._doc is not None
        return str(self._doc.get("version", "none"))

    def find(self, model: str, provider: str | None) -> tuple[str, dict[str, Any]] | None:
        """(key, entry) of ``model``, or None."""
        models = self._models()
        if model in models:
            return model, models[model]
        keys = self._by_suffix.get(model.rsplit("/", 1)[-1] if "/" in model else model, [])
        if not keys:
            return None
        ours = PROVIDERS.get(provider or "")
        key = min(keys, key=lambda k: (models[k].get("litellm_provider") != ours, k.count("/"), len(k), k))
        return key, models[key]

    def thresholds(self, model: str, provider: str | None) -> list[int]:
        found = self.find(model, provider)
        if found is None:
            return []
        return sorted({int(t["range"][0]) for t in found[1].get("tiered_pricing", []) if t["range"][0] > 0})

    def rates(self, model: str, provider: str | None, input_tokens: int) -> Rates | None:
        found = self.find(model, provider)
        if found is None:
            return None
        key, entry = found
        prices = entry
        for tier in sorted(entry.get("tiered_pricing", []), key=lambda t: t["range"][0]):
            if tier["range"][0] == 0 or input_tokens > tier["range"][0]:
                prices = tier
        if "input_cost_per_token" not in prices or "output_cost_per_token" not in prices:
            return None  # half a price would undercount: unpriced instead
        inp = _dec(prices["input_cost_per_token"])
        return Rates(uncached=inp, cache_read=_dec(prices.get("cache_read_input_token_cost", inp)),
                     cache_write=_dec(prices.get("cache_creation_input_token_cost", inp)),
                     output=_dec(prices["output_cost_per_token"]),
                     provider=str(entry.get("litellm_provider", "")), model=key, source=SOURCE)
