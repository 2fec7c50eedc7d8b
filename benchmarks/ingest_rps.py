#!/usr/bin/env python3
"""Requests per second the ingest server sustains on one core.

The server runs in its own process pinned to CPU 0 (``--server-cpu``); the load comes from another
process pinned to CPU 1: ``--connections`` kept-alive connections, each posting a real Claude Code
PostToolUse payload and waiting for the answer, for ``--seconds``. Two server variants:

* ``noop``: the server alone (parse, checks, read body, JSON check, answer ``{}``);
* ``spool``: as ``agent-collector run`` does it: each accepted body goes to the spool relay and is
  answered only once its line is durable (a writer thread; group commit: the lines that arrived together
  are written with one write and one fdatasync per file); a full relay answers 503, counted as errors.
  Every 200 is a line already on disk: the spool holds at least as many lines as answers.

    .venv/bin/python benchmarks/ingest_rps.py [--seconds 5] [--connections 8]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _hook_sample import payload

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TOKEN = "be" * 32  # the secret every request carries


def pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and cpu < (os.cpu_count() or 1):
        os.sched_setaffinity(0, {cpu})


def serve(mode: str, cpu: int, port_out: Any, spool: str) -> None:
    pin(cpu)
    from collector.ingest import IngestConfig, IngestServer, to_envelope
    from collector.ingest.relay import SpoolRelay
    from collector.sources.spool_writer import SpoolWriter

    relay = SpoolRelay(SpoolWriter(Path(spool))) if mode == "spool" else None

    def submit(agent: str, body: bytes, received: float) -> Any:
        if relay is not None:  # what `agent-collector run` does: answered once the line is durable
            envelope = to_envelope(agent, body, received)
            return relay.submit(agent, envelope["event"] or "", envelope["payload"], received)
        return None

    async def main() -> None:
        config = IngestConfig(token=TOKEN, port=0, max_connections=1024)
        server = IngestServer(submit, lambda: {"claude-code"}, dict, config)
        await server.start()
        port_out.put(server.port)
        await asyncio.Event().wait()

    asyncio.run(main())


async def load(port: int, body: bytes, connections: int, seconds: float) -> tuple[int, int]:
    request = (f"POST /v1/hooks/claude-code HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Agent-Collector-Token: {TOKEN}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    deadline = time.monotonic() + seconds
    done = errors = 0

    async def one() -> None:
        nonlocal done, errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while time.monotonic() < deadline:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            if head.startswith(b"HTTP/1.1 200"):
                done += 1
            else:
                errors += 1
        writer.close()

    await asyncio.gather(*(one() for _ in range(connections)))
    return done, errors


def run(mode: str, args: argparse.Namespace, body: bytes) -> None:
    ctx = multiprocessing.get_context("spawn")
    port_q = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory() as spool:
        server = ctx.Process(target=serve, args=(mode, args.server_cpu, port_q, spool), daemon=True)
        server.start()
        port = port_q.get()
        pin(args.client_cpu)
        started = time.monotonic()
        done, errors = asyncio.run(load(port, body, args.connections, args.seconds))
        elapsed = time.monotonic() - started
        server.terminate()  # no waiting: every answered line is already on disk
        server.join(5)
        lines = sum(p.read_bytes().count(b"\n") for p in Path(spool).rglob("*.jsonl"))
    extra = f", {lines} spool lines for {done} answers" if mode == "spool" else ""
    print(f"| {mode} | {args.connections} | {done / elapsed:,.0f} | {errors}{extra} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    args = ap.parse_args()
    body = payload()
    print(f"payload {len(body)} bytes, server on CPU {args.server_cpu}, load on CPU {args.client_cpu}, "
          f"{args.seconds:.0f} s each")
    print("| server | connections | requests/s | errors |")
    print("|---|---|---|---|")
    for mode in ("noop", "spool"):
        run(mode, args, body)


if __name__ == "__main__":
    main()
