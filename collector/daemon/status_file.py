"""``<state dir>/status.json``: the daemon's snapshot for ``agent-collector status`` and the tests, written
when it changed (its ``updated`` time aside) and at most every ``STATUS_EVERY_S`` unless forced. A change
of the cycle counter alone (an idle daemon's every poll) is written at most every ``CYCLES_EVERY_S``."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from collector.pipeline.processor import Pipeline
from collector.util.atomic import atomic_write

log = logging.getLogger("collector")  # the daemon's lines, as the Service's
STATUS_EVERY_S = 1.0  # status.json is rewritten at most this often (and only when it changed)
CYCLES_EVERY_S = 30.0  # ... and when only ``cycles`` moved, at most this often (no write and fsync per idle poll)


@dataclass(slots=True)
class StatusFile:
    """Owns the file and its write limit: the body last written (without its time), when (monotonic),
    and whether a change is held back by the limit (``held``: the worker writes it within that time)."""

    path: Path
    body: bytes = b""
    at: float = -STATUS_EVERY_S
    held: bool = False
    clock: Callable[[], float] = time.monotonic
    cycles: object = None  # the cycle counter last written

    def write(self, snapshot: dict[str, Any], force: bool = True) -> None:
        """``snapshot`` (with its ``updated`` time and ``cycles`` count), if it changed."""
        updated, cycles = snapshot.pop("updated"), snapshot.pop("cycles", None)
        body = orjson.dumps(snapshot)
        since = self.clock() - self.at
        if body == self.body and (cycles == self.cycles or (not force and since < CYCLES_EVERY_S)):
            self.held = False
            return
        if not force and since < STATUS_EVERY_S:
            self.held = True
            return
        snapshot["updated"], snapshot["cycles"] = updated, cycles
        try:
            atomic_write(self.path, orjson.dumps(snapshot))
        except OSError as exc:
            log.warning("cannot write status: %s", exc)
            return
        self.body, self.at, self.held, self.cycles = body, self.clock(), False, cycles


def pipeline_status(pipeline: Pipeline | None) -> dict[str, Any]:
    """The snapshot's ``pipeline``: what the pipeline counted since the start."""
    if pipeline is None:
        return {}
    stats = pipeline.stats
    return {"records": stats.records, "entries": stats.entries, "duplicates": stats.duplicates,
            "corrections": stats.corrections,  # docs/merge.md
            "parse_errors": stats.parse_errors, "by_event": stats.by_event, "without_model": stats.without_model,
            "times_replaced": stats.times_replaced, "unreadable": stats.unreadable, "truncated": stats.truncated,
            "attributes_left_out": pipeline.attribute_problems()}
