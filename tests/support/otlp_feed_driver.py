"""The process of the 25-kill OTLP test: a source with a lagging checkpoint feeding the three OTLP signals.

    python otlp_feed_driver.py DATA_DIR ENDPOINT COUNT

Feeds entries ``fed .. COUNT`` in batches of :data:`BATCH` into the logs, traces and metrics exporters of
one backend (each behind the shared durable queue), where ``fed`` is read from ``DATA_DIR/fed``: the
source's own checkpoint, written only *after* the exporters took a batch, like the daemon's checkpoint
commit after delivery. A ``kill -9`` between the two makes the next run offer that batch again. Once all
is fed and delivered (turns included, by ``end_of_input``) it prints the exporters' stats as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from collector.exporters.otlp import build_otlp_exporters
from collector.exporters.queue import QueuedExporter, QueueOptions
from collector.paths import Paths

BATCH = 20
OPTIONS = QueueOptions(max_batch=BATCH, backoff_initial=0.05, backoff_max=0.2, tick_interval=0.05,
                       drain_timeout=1.0)


def entry(i: int) -> dict[str, Any]:
    """A mixed stream: turns of 10 (prompt, model call, tool calls and their results), 4 sessions."""
    turn, step = divmod(i, 10)
    session = f"s{turn % 4}"
    base: dict[str, Any] = {
        "event.id": f"{i:032x}",
        "time_unix_nano": 1_800_000_000_000_000_000 + i * 1_000_000,
        "gen_ai.agent.type": "claude-code",
        "gen_ai.session.id": session,
        "gen_ai.turn.id": f"turn-{turn}",
        "seq": i,
    }
    if step == 0:
        name = "session.start" if turn < 4 else "user.prompt"
        return {**base, "event.name": name, "session.source": "startup"}
    if step == 1:
        return {**base, "event.name": "llm.response", "gen_ai.response.id": f"msg-{i}",
                "gen_ai.request.model": f"model-{turn % 3}", "gen_ai.usage.input_tokens": 1000 + i,
                "gen_ai.usage.output_tokens": 7 + i % 13, "duration_ms": 100 + i % 900}
    call = f"call-{turn}-{(step - 2) // 2}"
    tool = ("Bash", "Read", "Edit")[turn % 3]
    if step % 2 == 0:
        return {**base, "event.name": "tool.call", "gen_ai.tool.name": tool, "gen_ai.tool.call.id": call}
    status = "error" if i % 7 == 0 else "success"
    return {**base, "event.name": "tool.result", "gen_ai.tool.name": tool, "gen_ai.tool.call.id": call,
            "tool.result.status": status}


def fed(data_dir: Path) -> int:
    try:
        return int((data_dir / "fed").read_text())
    except FileNotFoundError:
        return 0


def set_fed(data_dir: Path, value: int) -> None:
    tmp = data_dir / "fed.tmp"
    tmp.write_text(str(value))
    os.replace(tmp, data_dir / "fed")


def main() -> int:
    data_dir, endpoint, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    paths = Paths(home=data_dir, config_dir=data_dir / "config", data_dir=data_dir)
    config = {"endpoint": endpoint, "signals": ["logs", "traces", "metrics"], "timeout": 2.0,
              "turn_grace": 0, "turn_idle_timeout": 3600}
    exporters = [e for e in build_otlp_exporters(config, {}, paths, options=OPTIONS)
                 if isinstance(e, QueuedExporter)]
    print("started", flush=True)
    for start in range(fed(data_dir), count, BATCH):
        batch = [entry(i) for i in range(start, min(count, start + BATCH))]
        for exporter in exporters:
            exporter.export(batch)
        set_fed(data_dir, start + len(batch))
        time.sleep(0.002)  # a source reads at its pace: delivery keeps up, kills land mid-stream
    left = [e.end_of_input(stall_s=10, limit_s=60) for e in exporters]
    stats = {e.name: e.stats() for e in exporters}
    for exporter in exporters:
        exporter.shutdown()
    print(json.dumps({"left": [b.queued + b.unsent for b in left], "stats": stats}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
