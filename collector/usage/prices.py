"""Cost from the ``genai-prices`` package's bundled price table: offline, never a network call.

Token semantics: our ``input`` includes cache reads and cache writes (OpenTelemetry), which is also what
genai-prices expects; it prices the uncached part, cache reads and cache writes each at their own rate
(Anthropic), or cache reads apart and the rest as input (OpenAI, Gemini). Long-context tiers apply a
higher rate to the whole call once its input passes a threshold, so calls are grouped into *bands* of
input size first (``band_sql``) and a band is priced at the one rate every call in it pays. A model the
table does not know is *unpriced* (``None``), never zero.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

# our gen_ai.provider.name -> genai-prices provider id
PROVIDERS = {
    "anthropic": "anthropic", "openai": "openai", "azure.ai.openai": "azure", "gcp.gemini": "google",
    "gcp.vertex_ai": "google", "gcp.gen_ai": "google", "google": "google", "aws.bedrock": "aws",
    "deepseek": "deepseek", "mistral_ai": "mistral", "x_ai": "x-ai", "groq": "groq", "openrouter": "openrouter",
}
MILLION = Decimal(1_000_000)


@dataclass(frozen=True, slots=True)
class Rates:
    """USD per token for one model, one day and one input band."""

    uncached: Decimal
    cache_read: Decimal
    cache_write: Decimal
    output: Decimal
    provider: str
    model: str

    def cost(self, input_tokens: int, cache_read: int, cache_write: int, output: int) -> Decimal:
        uncached = max(input_tokens - cache_read - cache_write, 0)
        return (self.uncached * uncached + self.cache_read * cache_read + self.cache_write * cache_write
                + self.output * output)


def table_version() -> str:
    try:
        return f"genai-prices {importlib.metadata.version('genai-prices')}"
    except importlib.metadata.PackageNotFoundError:
        return "none"


class PriceTable:
    """Looks models up once and caches their rates per (model, provider, day, band)."""

    def __init__(self) -> None:
        try:
            from genai_prices import data_snapshot
        except ImportError:
            self._snapshot: Any = None
        else:
            self._snapshot = data_snapshot.get_snapshot()
        self.version = table_version() if self._snapshot is not None else "none (genai-prices not installed)"
        self._rates: dict[tuple[str, str | None, str, int], Rates | None] = {}
        self._by_price: dict[tuple[int, int], Rates] = {}  # (id of the price in effect, input) -> rates
        self.thresholds: tuple[int, ...] = ()
        self._found: dict[tuple[str, str | None], Any] = {}

    def _lookup(self, model: str, provider: str | None) -> Any:
        key = (model, provider)
        if key not in self._found:
            self._found[key] = _find(self._snapshot, model, PROVIDERS.get(provider or ""))
        return self._found[key]

    def prepare(self, models: list[tuple[str | None, str | None]]) -> None:
        """Collect the long-context thresholds of every model present, so bands can be formed in SQL."""
        starts: set[int] = set()
        for model, provider in models:
            found = self._lookup(model, provider) if model and self._snapshot is not None else None
            if found is None:
                continue
            info = found[1]
            prices = info.prices if isinstance(info.prices, list) else [info.prices]
            for price in prices:
                price = getattr(price, "prices", price)
                for value in price.__dict__.values():
                    for tier in getattr(value, "tiers", ()):
                        starts.add(int(tier.start))
        self.thresholds = tuple(sorted(starts))

    def band_sql(self, column: str) -> str:
        """SQL giving a call's band: how many thresholds its input exceeds (tiers apply above ``start``)."""
        if not self.thresholds:
            return "0"
        return "(" + " + ".join(f"({column} > {int(t)})" for t in self.thresholds) + ")"

    def representative(self, band: int) -> int:
        """An input size inside ``band`` of ``band_sql`` (all its calls get the same tier decisions)."""
        return self.thresholds[band - 1] + 1 if band > 0 else 0

    def rates(self, model: str | None, provider: str | None, day: str, input_tokens: int) -> Rates | None:
        """The rates of a call of ``input_tokens`` input (which decides the long-context tier)."""
        if not model or self._snapshot is None:
            return None
        key = (model, provider, day, input_tokens)
        if key not in self._rates:
            self._rates[key] = self._compute(model, provider, day, input_tokens)
        return self._rates[key]

    def _compute(self, model: str, provider: str | None, day: str, input_tokens: int) -> Rates | None:
        found = self._lookup(model, provider)
        if found is None:
            return None
        prov, info = found
        when = datetime.strptime(day, "%Y-%m-%d").replace(hour=12, tzinfo=UTC)
        price = info.get_prices(when)
        key = (id(price), input_tokens)  # most days share one price object: compute its rates once
        if key not in self._by_price:
            self._by_price[key] = self._rates_of(price, input_tokens, prov.id, info.id)
        return self._by_price[key]

    def _rates_of(self, price: Any, input_tokens: int, provider: str, model: str) -> Rates:
        flat = _flatten(price, input_tokens)
        return Rates(
            uncached=_per_token(flat, input_tokens=1_000_000),
            cache_read=_per_token(flat, input_tokens=1_000_000, cache_read_tokens=1_000_000),
            cache_write=_per_token(flat, input_tokens=1_000_000, cache_write_tokens=1_000_000),
            output=_per_token(flat, output_tokens=1_000_000),
            provider=provider, model=model,
        )


def _find(snapshot: Any, model: str, provider_id: str | None) -> Any:
    """(provider, model info) from the table: with the provider we know, else by the model name alone."""
    for pid in ((provider_id, None) if provider_id else (None,)):
        try:
            return snapshot.find_provider_model(model, None, pid, None)
        except LookupError:
            continue
    return None


def _flatten(price: Any, total_input: int) -> Any:
    """The same price with every tiered rate replaced by the rate a call of ``total_input`` pays."""
    from genai_prices.types import ModelPrice, TieredPrices

    flat: dict[str, Any] = {}
    for key, value in price.__dict__.items():
        if isinstance(value, TieredPrices):
            rate = value.base
            for tier in reversed(value.tiers):
                if total_input > tier.start:
                    rate = tier.price
                    break
            value = rate
        flat[key] = value
    return ModelPrice(**flat)


def _per_token(price: Any, **usage: int) -> Decimal:
    """USD per token of one kind: the price of 1M of it (a cache part comes as 1M input tokens that are
    all cache reads, or all cache writes, so no uncached input is in the figure)."""
    from genai_prices import Usage

    return Decimal(price.calc_price(Usage(**usage))["total_price"]) / MILLION
