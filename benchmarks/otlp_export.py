"""OTLP export cost with logs, traces and metrics all on, on real entries, and its share of a backfill.

1. Export: the entries the real pipeline makes of every agent's fixture session (tests/fixtures, the
   default configuration: content capture off), copied with fresh ids until there are N, go through
   ``build_otlp_exporters`` (the backend's durable queue, the three signals' delivery threads, the
   hand-written protobuf encoder, OTLP/HTTP) to a receiver in another process (its CPU is not counted).
   Printed: entries per CPU second (one core's worth), CPU seconds per 10,000 entries (the process: the
   caller and the delivery threads), and the wall-clock rate on this machine.
2. Backfill share: ``collect --once`` over a generated corpus of Claude Code transcripts (``--mb``),
   once without OTLP and once with all three signals to the receiver (``collect --once`` waits until its
   turns are delivered); printed: the CPU of each run (the collect process alone) and what OTLP adds.

    .venv/bin/python benchmarks/otlp_export.py --n 20000 --mb 20
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

_IDS = ("event.id", "gen_ai.session.id", "gen_ai.tool.call.id", "gen_ai.response.id", "gen_ai.request.id",
        "gen_ai.subagent.parent_tool_call.id", "gen_ai.turn.id")


def serve(port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

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


def real_entries(n: int) -> list[dict[str, Any]]:
    """The fixture sessions' entries, copied (ids suffixed, so every copy is its own sessions) up to ``n``."""
    from _session_entries import session_entries

    base = session_entries({})
    out: list[dict[str, Any]] = []
    copy = 0
    while len(out) < n:
        for entry in base:
            fresh = dict(entry)
            for key in _IDS:
                if isinstance(fresh.get(key), str):
                    fresh[key] = f"{fresh[key]}-{copy}"
            out.append(fresh)
        copy += 1
    return out[:n]


def export_run(entries: list[dict[str, Any]], port: int, batch: int) -> dict[str, float]:
    from collector.exporters.otlp import build_otlp_exporters
    from collector.exporters.queue import QueuedExporter, QueueOptions
    from collector.paths import Paths

    with tempfile.TemporaryDirectory() as tmp:
        paths = Paths(home=Path(tmp), config_dir=Path(tmp) / "config", data_dir=Path(tmp) / "data")
        config = {"endpoint": f"http://127.0.0.1:{port}", "turn_grace": 0, "turn_idle_timeout": 0}
        exporters = [e for e in build_otlp_exporters(config, {}, paths, QueueOptions(tick_interval=0.05))
                     if isinstance(e, QueuedExporter)]
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for start in range(0, len(entries), batch):
            part = entries[start : start + batch]
            for exporter in exporters:  # as the delivery chain does: the same batch to each
                exporter.export(part)
        while any(e.pending for e in exporters) or any(
            e.stats()["inner"].get("open_turns") or e.stats()["inner"].get("outbox_spans") for e in exporters
        ):
            time.sleep(0.005)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        stats = {e.name: e.stats()["inner"] for e in exporters}
        for exporter in exporters:
            exporter.shutdown()
    return {"wall": wall, "cpu": cpu, "spans": stats["otlp-default-traces"]["sent_spans"],
            "logs": stats["otlp-default-logs"]["sent"]}


def collect_cpu(home: Path, tmp: Path, otlp_port: int | None) -> float:
    """CPU seconds (user + system) of one ``collect --once`` process over ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_COLLECTOR_"))}
    env |= {"AGENT_COLLECTOR_DATA_DIR": str(tmp / "data"), "AGENT_COLLECTOR_CONFIG_DIR": str(tmp / "cfg")}
    if otlp_port is not None:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{otlp_port}"
    cmd = [sys.executable, "-m", "collector", "collect", "--once", "--home", str(home), "--output", str(tmp / "out")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"collect --once failed with {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def backfill_share(mb: int, port: int) -> tuple[float, float, int]:
    from _claude_corpus import generate

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        generate(home / ".claude" / "projects", mb * 1024 * 1024)
        without = collect_cpu(home, Path(tmp) / "a", None)
        with_otlp = collect_cpu(home, Path(tmp) / "b", port)
        lines = sum(p.read_bytes().count(b"\n") for p in (Path(tmp) / "b" / "out").glob("*.jsonl"))
    return without, with_otlp, lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="entries to export")
    parser.add_argument("--batch", type=int, default=500, help="entries per export() call (the pipeline's batch)")
    parser.add_argument("--mb", type=int, default=20, help="size of the backfill corpus (0: skip that part)")
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return 0
    import logging

    logging.getLogger("collector").setLevel(logging.ERROR)
    receiver = subprocess.Popen([sys.executable, __file__, "--serve", "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None
        port = int(receiver.stdout.readline())
        entries = real_entries(args.n)
        run = export_run(entries, port, args.batch)
        n = len(entries)
        print(f"entries: {n} real fixture entries of 5 agents (batches of {args.batch}), logs + traces + metrics")
        print(f"per core: {n / run['cpu']:,.0f} entries per CPU second")
        print(f"cpu: {run['cpu'] / n * 10_000:.2f} CPU s per 10,000 entries ({run['cpu']:.2f} s total)")
        print(f"wall: {n / run['wall']:,.0f} entries/s end to end on this machine ({run['wall']:.2f} s)")
        print(f"sent: {run['logs']:.0f} log records, {run['spans']:.0f} spans")
        if args.mb:
            without, with_otlp, lines = backfill_share(args.mb, port)
            print(f"backfill of {args.mb} MB of Claude Code transcripts ({lines} entries), collect --once CPU: "
                  f"{without:.2f} s without OTLP, {with_otlp:.2f} s with it: OTLP adds "
                  f"{(with_otlp - without) / without * 100:.0f} %")
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
