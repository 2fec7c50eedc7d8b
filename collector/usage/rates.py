"""The rates one call is priced at, whichever table gave them."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True, slots=True)
class Rates:
    """USD per token for one model, one day and one input band; ``source`` names the table
    (``genai-prices``, ``litellm`` or ``config``)."""

    uncached: Decimal
    cache_read: Decimal
    cache_write: Decimal
    output: Decimal
    provider: str
    model: str
    source: str = "genai-prices"

    def cost(self, input_tokens: int, cache_read: int, cache_write: int, output: int) -> Decimal:
        uncached = max(input_tokens - cache_read - cache_write, 0)
        return (self.uncached * uncached + self.cache_read * cache_read + self.cache_write * cache_write
                + self.output * output)
