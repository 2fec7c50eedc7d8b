"""A tiny process for the kill -9 test: feeds entries into the OTLP logs+traces exporters (durable queues)
and then waits to be killed; or, with ``--deliver``, only starts the exporters and waits until the queues
left by a previous (killed) run are delivered, then prints the stats as JSON and exits.

    python otlp_kill_driver.py DATA_DIR ENDPOINT COUNT      # prints "queued COUNT", then "failed" once
                                                            # every queue failed to send 3 times; sleeps
    python otlp_kill_driver.py DATA_DIR ENDPOINT --deliver  # prints the stats once everything went out
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from collector.exporters.otlp import build_otlp_exporters
from collector.exporters.queue import QueuedExporter, QueueOptions
from collector.paths import Paths

OPTIONS = QueueOptions(backoff_initial=0.05, backoff_max=0.2, tick_interval=0.05, drain_timeout=1.0)


def entry(i: int) -> dict[str, object]:
    turn = i // 10
    name = "user.prompt" if i % 10 == 0 else "tool.call"
    return {
        "event.name": name,
        "event.id": f"{i:032x}",
        "time_unix_nano": 1_800_000_000_000_000_000 + i * 1_000_000,
        "gen_ai.agent.type": "claude-code",
        "gen_ai.session.id": f"s{turn % 3}",
        "gen_ai.turn.id": f"turn-{turn}",
        "gen_ai.tool.name": "Bash",
        "gen_ai.tool.call.id": f"call-{i}",
        "seq": i,
    }


def busy(exporters: list[QueuedExporter]) -> bool:
    for exporter in exporters:
        stats = exporter.stats()
        if stats["queued"] or stats["inner"].get("open_turns") or stats["inner"].get("outbox_spans"):
            return True
    return False


def main() -> int:
    data_dir, endpoint, what = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    paths = Paths(home=data_dir, config_dir=data_dir / "config", data_dir=data_dir)
    config = {
        "endpoint": endpoint,
        "signals": ["logs", "traces"],
        "timeout": 0.5,
        "turn_grace": 0,
        "turn_idle_timeout": 0.5,
    }
    exporters = [
        e for e in build_otlp_exporters(config, {}, paths, options=OPTIONS) if isinstance(e, QueuedExporter)
    ]
    if what == "--deliver":
        deadline = time.monotonic() + 60
        while busy(exporters) and time.monotonic() < deadline:
            time.sleep(0.05)
        print(json.dumps({e.name: e.stats() for e in exporters}), flush=True)
        for exporter in exporters:
            exporter.shutdown()
        return 0
    count = int(what)
    for start in range(0, count, 25):
        batch = [entry(i) for i in range(start, min(count, start + 25))]
        for exporter in exporters:
            exporter.export(batch)
    print(f"queued {count}", flush=True)
    deadline = time.monotonic() + 60  # the backend is down: each queue fails and backs off (0.05-0.2 s)
    while any(e.stats()["failures"] < 3 for e in exporters) and time.monotonic() < deadline:
        time.sleep(0.02)
    print("failed" if all(e.stats()["failures"] >= 3 for e in exporters) else "never failed", flush=True)
    time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
