"""When the work happened: model calls, tokens and tool calls per local day and per weekday and hour (the
dashboard's heatmap), summed from the rollup's quarter hours (``slots``, read by its key's range)."""

from __future__ import annotations

import sqlite3
from datetime import datetime, tzinfo
from typing import Any

from collector.usage.rollup import SLOT_NS

SQL = ("SELECT slot, SUM(calls), SUM(input + output), SUM(tool_calls), SUM(tool_failures) FROM slots "
       "WHERE slot >= ? AND slot < ? GROUP BY slot")


def activity(db: sqlite3.Connection, since_ns: int, until_ns: int, tz: tzinfo) -> dict[str, Any]:
    """``by_day``: local date -> sums; ``by_hour``: 7 rows (Monday first) of 24 hours of model calls."""
    grid = [[0] * 24 for _ in range(7)]
    tokens_grid = [[0] * 24 for _ in range(7)]
    days: dict[str, dict[str, int]] = {}
    try:
        rows = db.execute(SQL, (since_ns // SLOT_NS, -(-until_ns // SLOT_NS))).fetchall()
    except sqlite3.OperationalError:  # a store from before the rollup, read without opening it for writing
        rows = []
    for slot, calls, tokens, tools, failures in rows:
        local = datetime.fromtimestamp(slot * SLOT_NS / 1e9, tz)
        grid[local.weekday()][local.hour] += calls or 0
        tokens_grid[local.weekday()][local.hour] += tokens or 0
        day = days.setdefault(local.date().isoformat(), {"calls": 0, "total_tokens": 0, "tool_calls": 0,
                                                        "tool_failures": 0})
        day["calls"] += calls or 0
        day["total_tokens"] += tokens or 0
        day["tool_calls"] += tools or 0
        day["tool_failures"] += failures or 0
    return {"by_hour": grid, "tokens_by_hour": tokens_grid,
            "by_day": [{"day": d, **v} for d, v in sorted(days.items())]}
