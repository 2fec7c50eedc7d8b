"""The metric exporter's cumulative series as JSON, for the checkpoint store.

A series keeps its value *and* its start time across restarts: saved with the durable queue's position
that produced it (``OtlpMetricsExporter.checkpoint``), restored at start, so the stream a backend sees
goes on (same start time, the total resumes exactly where the position is). When the saved state is
missing or unreadable the series start from zero with new start times (and the queue from its ack file):
a new start time never comes with an old total.
"""

from __future__ import annotations

import math
from typing import Any

from collector.exporters.otlp_metrics import INSTRUMENTS, Meter, Series


def series_json(series: Series) -> dict[str, Any]:
    out: dict[str, Any] = {"attrs": series.attrs, "start_ns": series.start_ns, "value": series.value}
    if series.buckets:
        out.update(total=series.total, buckets=list(series.buckets),
                   low=series.low if math.isfinite(series.low) else None,
                   high=series.high if math.isfinite(series.high) else None)
    return out


def meters_json(meters: dict[tuple[str, str], Meter]) -> list[dict[str, Any]]:
    return [
        {
            "resource": list(key),
            "series": {instrument.name: [series_json(s) for s in points.values()]
                       for instrument, points in meter.series.items()},
        }
        for key, meter in meters.items()
    ]


def load_meters(data: Any) -> dict[tuple[str, str], Meter]:
    """The meters saved by :func:`meters_json`; raises ValueError/TypeError/KeyError on a bad shape."""
    if not isinstance(data, list):
        raise TypeError("meters is not a list")
    meters: dict[tuple[str, str], Meter] = {}
    for item in data:
        key = (str(item["resource"][0]), str(item["resource"][1]))
        meter = meters.setdefault(key, Meter())
        for name, points in dict(item["series"]).items():
            instrument = INSTRUMENTS[name]
            for saved in points:
                attrs = {str(k): str(v) for k, v in dict(saved["attrs"]).items()}
                series = meter.get(instrument, attrs, start_ns=int(saved["start_ns"]))
                series.value = int(saved["value"])
                if instrument.bounds is not None:
                    buckets = [int(b) for b in saved["buckets"]]
                    if len(buckets) != len(instrument.bounds) + 1:
                        raise ValueError(f"{name}: {len(buckets)} buckets")
                    series.buckets = buckets
                    series.total = float(saved["total"])
                    series.low = float("inf") if saved.get("low") is None else float(saved["low"])
                    series.high = float("-inf") if saved.get("high") is None else float(saved["high"])
    return meters
