"""The tunables of a durable queue (:class:`QueueOptions`), and the segment log they size.

Apart from the queue itself so that its delivery thread (``queue_delivery``) and the OTLP exporter, which
shares one log among the queues of its signals, can use them without the queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from collector.exporters.queue_log import SegmentLog


@dataclass(frozen=True, slots=True)
class QueueOptions:
    """Tunables; the defaults suit a daemon, tests shrink them."""

    max_batch: int = 512
    max_batch_bytes: int = 4 * 1024 * 1024
    segment_bytes: int | None = None  # default: cap/8, between 4 KiB and 8 MiB
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    tick_interval: float = 1.0
    drain_timeout: float = 2.0
    max_unexpected_failures: int = 5
    ack_interval: float = 1.0  # an acknowledged position reaches the disk at least this often...
    ack_every: int = 1  # ...or after this many delivered batches (1: after each), when idle or stopping


def new_log(directory: Path, cap_bytes: int, consumers: list[str], options: QueueOptions) -> SegmentLog:
    """The segment log of a queue (or of several sharing it), sized from ``options``."""
    segment_bytes = options.segment_bytes or max(4096, min(8 * 1024 * 1024, cap_bytes // 8))
    return SegmentLog(Path(directory), cap_bytes, segment_bytes, consumers, options.ack_interval,
                      options.ack_every)
