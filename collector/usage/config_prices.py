"""The user's own prices: ``[prices."<model>"]`` in config.toml, USD per million tokens.

They are checked by the config schema (``schemas/config.schema.json``) before they get here; a model named
here is priced from here whatever the bundled tables say (``PriceTable.rates`` asks this first). The name
is the model as the agent reports it (exact match). ``cache_read`` and ``cache_write`` default to the
input price."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from collector.usage.rates import Rates

SOURCE = "config"
MILLION = Decimal(1_000_000)


def _per_token(value: float) -> Decimal:
    return Decimal(str(value)) / MILLION


class ConfigPrices:
    """Rates per model from the ``[prices]`` section."""

    def __init__(self, prices: Mapping[str, Mapping[str, float]] | None = None) -> None:
        self._rates = {model: _rates(model, entry) for model, entry in (prices or {}).items()}

    def __bool__(self) -> bool:
        return bool(self._rates)

    def rates(self, model: str) -> Rates | None:
        return self._rates.get(model)


def _rates(model: str, entry: Mapping[str, float]) -> Rates:
    inp = entry["input"]
    return Rates(uncached=_per_token(inp), cache_read=_per_token(entry.get("cache_read", inp)),
                 cache_write=_per_token(entry.get("cache_write", inp)), output=_per_token(entry["output"]),
                 provider="", model=model, source=SOURCE)
