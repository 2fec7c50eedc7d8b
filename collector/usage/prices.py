"""Cost from the user's ``[prices]`` (``config_prices``), then the ``genai-prices`` package's bundled
table, then the vendored LiteLLM table (``litellm_prices``) for models genai-prices lacks: offline, never
a network call.

Token semantics: our ``input`` includes cache reads and cache writes (OpenTelemetry), which is also what
genai-prices expects; it prices the uncached part, cache reads and cache writes each at their own rate
(Anthropic), or cache reads apart and the rest as input (OpenAI, Gemini). Long-context tiers apply a
higher rate to the whole call once its input passes a threshold, so calls are grouped into *bands* of
input size first (``band_sql``) and a band is priced at the one rate every call in it pays. A model the
table does not know is *unpriced* (``None``), never zero.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from collector.usage.config_prices import ConfigPrices
from collector.usage.litellm_prices import LiteLLMPrices
from collector.usage.rates import Rates

__all__ = ["CACHE_NAME", "PriceTable", "Rates", "table_version"]

# our gen_ai.provider.name -> genai-prices provider id
PROVIDERS = {
    "anthropic": "anthropic", "openai": "openai", "azure.ai.openai": "azure", "gcp.gemini": "google",
    "gcp.vertex_ai": "google", "gcp.gen_ai": "google", "google": "google", "aws.bedrock": "aws",
    "deepseek": "deepseek", "mistral_ai": "mistral", "x_ai": "x-ai", "groq": "groq", "openrouter": "openrouter",
}
MILLION = Decimal(1_000_000)
CACHE_NAME = "usage-prices.json"  # next to the store


def table_version() -> str:
    try:
        return f"genai-prices {importlib.metadata.version('genai-prices')}"
    except importlib.metadata.PackageNotFoundError:
        return "none"


class PriceTable:
    """Looks models up once and caches their rates per (model, provider, day, input size).

    With ``cache_file``, the rates and thresholds already worked out are kept in a small JSON file
    (keyed by the table's version, so an upgraded genai-prices starts afresh): a report whose models and
    days are all in it never loads the table (which costs a few hundred milliseconds)."""

    def __init__(self, cache_file: Path | None = None,
                 config_prices: Mapping[str, Mapping[str, float]] | None = None) -> None:
        self._litellm = LiteLLMPrices()
        self.base_version = table_version()
        self.version = f"{self.base_version}, {self._litellm.version}"
        self._config = ConfigPrices(config_prices)
        self._cache_file = cache_file
        self._loaded = False
        self._snapshot: Any = None
        self._dirty = False
        self._cached = _read_cache(cache_file, self.version)
        self._rates: dict[tuple[str, str | None, str, int], Rates | None] = {}
        self._by_price: dict[tuple[int, int], Rates] = {}  # (id of the price in effect, input) -> rates
        self.thresholds: tuple[int, ...] = ()
        self._found: dict[tuple[str, str | None], Any] = {}

    @property
    def available(self) -> bool:
        return True  # the vendored LiteLLM table is always there; genai-prices may be missing

    def _table(self) -> Any:
        if not self._loaded:
            self._loaded = True
            try:
                from genai_prices import data_snapshot
            except ImportError:
                pass
            else:
                self._snapshot = data_snapshot.get_snapshot()
        return self._snapshot

    def _lookup(self, model: str, provider: str | None) -> Any:
        key = (model, provider)
        if key not in self._found:
            table = self._table()
            self._found[key] = None if table is None else _find(table, model, PROVIDERS.get(provider or ""))
        return self._found[key]

    def prepare(self, models: list[tuple[str | None, str | None]]) -> None:
        """Collect the long-context thresholds of every model present, so bands can be formed in SQL."""
        starts: set[int] = set()
        known = self._cached.setdefault("thresholds", {})
        for model, provider in models:
            if not model or not self.available or self._config.rates(model) is not None:
                continue
            key = f"{model}|{provider or ''}"
            if key not in known:
                known[key] = self._model_thresholds(model, provider)
                self._dirty = True
            starts.update(known[key])
        self.thresholds = tuple(sorted(starts))

    def _model_thresholds(self, model: str, provider: str | None) -> list[int]:
        found = self._lookup(model, provider)
        if found is None:
            return self._litellm.thresholds(model, provider)
        info = found[1]
        starts: set[int] = set()
        for price in info.prices if isinstance(info.prices, list) else [info.prices]:
            for value in getattr(price, "prices", price).__dict__.values():
                starts.update(int(tier.start) for tier in getattr(value, "tiers", ()))
        return sorted(starts)

    def save(self) -> None:
        """Keep what was worked out for the next report (best effort: a read-only place is fine)."""
        if not self._dirty or self._cache_file is None or not self.available:
            return
        import json
        import os

        data = json.dumps({**self._cached, "version": self.version}).encode()
        import threading

        tmp = self._cache_file.with_name(f"{self._cache_file.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, self._cache_file)
            self._dirty = False
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()

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
        if not model:
            return None
        own = self._config.rates(model)
        if own is not None:  # the user's [prices] win over every table
            return own
        if not self.available:
            return None
        key = (model, provider, day, input_tokens)
        if key not in self._rates:
            self._rates[key] = self._cached_rates(key)
        return self._rates[key]

    def _cached_rates(self, key: tuple[str, str | None, str, int]) -> Rates | None:
        model, provider, day, input_tokens = key
        store = self._cached.setdefault("rates", {})
        name = f"{model}|{provider or ''}|{day}|{input_tokens}"
        if name in store:
            return _rates_from(store[name])
        rates = self._compute(model, provider, day, input_tokens)
        store[name] = None if rates is None else [str(rates.uncached), str(rates.cache_read),
                                                   str(rates.cache_write), str(rates.output),
                                                   rates.provider, rates.model, rates.source]
        self._dirty = True
        return rates

    def _compute(self, model: str, provider: str | None, day: str, input_tokens: int) -> Rates | None:
        found = self._lookup(model, provider)
        if found is None:  # the second table, for what genai-prices lacks
            return self._litellm.rates(model, provider, input_tokens)
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


def _read_cache(path: Path | None, version: str) -> dict[str, Any]:
    if path is None:
        return {}
    import json

    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("version") == version else {}


def _rates_from(value: Any) -> Rates | None:
    if value is None:
        return None
    uncached, cache_read, cache_write, output, provider, model, source = value
    return Rates(Decimal(uncached), Decimal(cache_read), Decimal(cache_write), Decimal(output), provider, model,
                 source)


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
