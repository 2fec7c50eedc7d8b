"""A correction (docs/merge.md) adds to the token counters only what it changes; histograms keep their
first observation, so nothing is counted twice."""

from __future__ import annotations

from typing import Any

from collector.exporters.otlp_metrics import TOKENS, USAGE_COUNTERS, Meter
from collector.exporters.semconv import Semconv

OUT = "gen_ai.usage.output_tokens"


def _call(output: int, **extra: Any) -> dict[str, Any]:
    return {"event.name": "llm.response", "event.id": "a", "gen_ai.response.model": "m",
            "gen_ai.usage.input_tokens": 100, OUT: output, **extra}


def _total(meter: Meter, key: str) -> int:
    return sum(s.value for s in meter.series.get(USAGE_COUNTERS[key], {}).values())


def test_a_correction_adds_the_difference_to_the_counters() -> None:
    meter = Meter(Semconv(released=True, latest=True))
    meter.record(_call(1))
    meter.record(_call(17, **{"collector.correction": "d", "collector.replaces": {OUT: 1}}))
    assert _total(meter, OUT) == 17
    assert _total(meter, "gen_ai.usage.input_tokens") == 100  # not replaced: not counted again
    assert sum(s.value for s in meter.series[TOKENS].values()) == 2  # one input, one output observation


def test_a_correction_to_fewer_tokens_leaves_the_counter() -> None:
    meter = Meter(Semconv(released=False, latest=True))
    meter.record(_call(40))
    meter.record(_call(17, **{"collector.correction": "d", "collector.replaces": {OUT: 40}}))
    assert _total(meter, OUT) == 40  # a counter never goes down
