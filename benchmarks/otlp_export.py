"""OTLP export throughput and CPU cost, with logs, traces and metrics all on.

Feeds N synthetic Claude-Code-shaped entries (turns of prompt, model calls with tokens, tool calls and a
ready_for_review status) through ``build_otlp_exporters`` (durable queues, real SDK exporters, real
OTLP/HTTP protobuf) to a receiver running in a separate process (so its CPU is not counted), waits
until every queue is empty and every turn has been sent, and prints entries/s and CPU seconds per
10,000 entries (process CPU: the caller and the delivery threads).

    .venv/bin/python benchmarks/otlp_export.py --n 20000
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BASE = 1_800_000_000_000_000_000


def serve(port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


def make_entries(n: int) -> list[dict[str, Any]]:
    common = {
        "gen_ai.agent.type": "claude-code",
        "user.id": "bench",
        "host.name": "bench",
        "source.kind": "transcript",
        "schema.version": "1.0",
        "workspace.path": "/home/bench/project",
    }
    out: list[dict[str, Any]] = []
    i = 0
    while len(out) < n:
        turn = i
        session = f"session-{turn // 20}"
        t = BASE + turn * 60_000_000_000
        tid = f"turn-{turn}"
        base = {**common, "gen_ai.session.id": session, "gen_ai.turn.id": tid}
        rows: list[dict[str, Any]] = [
            {
                "event.name": "user.prompt",
                "gen_ai.input.messages.length": 120,
                "gen_ai.input.messages.hmac": "a" * 64,
            }
        ]
        for call in range(3):
            llm = {
                "gen_ai.provider.name": "anthropic",
                "gen_ai.request.model": "claude-sonnet-4-5",
                "gen_ai.request.id": f"{tid}-req-{call}",
            }
            rows.append({"event.name": "llm.request", **llm})
            rows.append(
                {
                    "event.name": "llm.response",
                    **llm,
                    "gen_ai.response.id": f"{tid}-msg-{call}",
                    "gen_ai.response.model": "claude-sonnet-4-5",
                    "gen_ai.response.finish_reasons": ["tool_use"],
                    "gen_ai.usage.input_tokens": 22000 + call,
                    "gen_ai.usage.output_tokens": 50,
                    "gen_ai.usage.cache_read.input_tokens": 7000,
                    "gen_ai.usage.cache_creation.input_tokens": 2000,
                    "duration_ms": 900,
                    "gen_ai.output.messages.length": 300,
                    "gen_ai.output.messages.hmac": "b" * 64,
                }
            )
            tool = {"gen_ai.tool.name": "Bash", "gen_ai.tool.call.id": f"{tid}-tool-{call}"}
            rows.append({"event.name": "tool.call", **tool, "gen_ai.tool.call.arguments.length": 40})
            rows.append(
                {
                    "event.name": "tool.result",
                    **tool,
                    "tool.result.status": "success",
                    "duration_ms": 20,
                    "gen_ai.tool.call.result.length": 88,
                }
            )
        rows.append({"event.name": "session.status", "session.status": "ready_for_review"})
        for k, row in enumerate(rows):
            out.append(
                {
                    **base,
                    **row,
                    "event.id": f"{turn:016x}{k:016x}",
                    "time_unix_nano": t + k * 1_000_000_000,
                    "observed_time_unix_nano": t + k * 1_000_000_000,
                }
            )
        i += 1
    return out  # whole turns: n rounded up


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="entries to export")
    parser.add_argument(
        "--batch", type=int, default=500, help="entries per export() call (the pipeline's batch)"
    )
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return 0

    from collector.exporters.otlp import build_otlp_exporters
    from collector.exporters.queue import QueuedExporter, QueueOptions
    from collector.paths import Paths

    receiver = subprocess.Popen([sys.executable, __file__, "--serve", "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None
        port = int(receiver.stdout.readline())
        entries = make_entries(args.n)
        with tempfile.TemporaryDirectory() as tmp:
            paths = Paths(home=Path(tmp), config_dir=Path(tmp) / "config", data_dir=Path(tmp) / "data")
            config = {"endpoint": f"http://127.0.0.1:{port}", "turn_grace": 0}
            options = QueueOptions(tick_interval=0.05)
            exporters = [
                e for e in build_otlp_exporters(config, {}, paths, options) if isinstance(e, QueuedExporter)
            ]
            cpu0, wall0 = time.process_time(), time.perf_counter()
            enqueue = 0.0
            for start in range(0, len(entries), args.batch):
                batch = entries[start : start + args.batch]
                t0 = time.perf_counter()
                for exporter in exporters:
                    exporter.export(batch)
                enqueue += time.perf_counter() - t0
            while any(e.pending for e in exporters) or any(
                e.stats()["inner"].get("open_turns") or e.stats()["inner"].get("outbox_spans")
                for e in exporters
            ):
                time.sleep(0.01)
            wall = time.perf_counter() - wall0
            cpu = time.process_time() - cpu0
            stats = {e.name: e.stats() for e in exporters}
            for exporter in exporters:
                exporter.shutdown()
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)
    traces = stats["otlp-default-traces"]["inner"]
    print(f"entries: {len(entries)} (batches of {args.batch}), signals: logs + traces + metrics")
    print(f"throughput: {len(entries) / wall:,.0f} entries/s end to end ({wall:.2f} s wall)")
    print(f"cpu: {cpu / len(entries) * 10_000:.2f} CPU s per 10,000 entries ({cpu:.2f} s total)")
    print(
        f"enqueue (what the pipeline waits for): {enqueue / len(entries) * 1e6:.1f} us per entry, 3 queues"
    )
    print(
        f"spans sent: {traces['sent_spans']}, traces: {traces['sent_traces']}, "
        f"log records: {stats['otlp-default-logs']['inner']['sent']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
