"""Garbage collector settings for the collector's process.

Decoded records are many small containers that live for one batch. With CPython's default threshold
(a collection every 700 new containers) a backfill spent about 13 % of its CPU in collections that found
nothing to free (measured with benchmarks/peers.py). A larger first threshold makes them rare; what was
imported at start-up is frozen, so no collection walks it again. Reference counting frees everything
else as before; only cycles wait a little longer.
"""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 100)


def tune() -> None:
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
