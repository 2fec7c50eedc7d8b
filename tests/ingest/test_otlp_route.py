"""The OTLP route alone, with a real spool relay: a request too long for the spool's line cap is refused
(413) before anything is written, rather than written and then skipped by the reader."""

from __future__ import annotations

import asyncio
from pathlib import Path

from support.otlp_requests import logs_request

from collector.ingest.otlp_route import OtlpRoute
from collector.ingest.relay import SpoolRelay
from collector.ingest.wire import Request
from collector.sources.spool_writer import SpoolWriter


def _post(route: OtlpRoute, body: bytes) -> int:
    request = Request("POST", "/v1/logs", {}, "HTTP/1.1", {"content-type": "application/x-protobuf"})
    return asyncio.run(route.post(request, body, 1796000000.0)).status


def test_a_request_over_the_spool_line_cap_is_refused_unwritten(tmp_path: Path) -> None:
    relay = SpoolRelay(SpoolWriter(tmp_path / "spool", fsync=False))
    try:
        route = OtlpRoute(relay, lambda: {"claude-code": "claude-code"}, 1 << 20, max_line=4096)
        assert _post(route, logs_request("claude-code", 2)) == 200
        assert _post(route, logs_request("claude-code", 200)) == 413
    finally:
        relay.close()
    lines = [line for f in (tmp_path / "spool" / "otlp" / "claude-code").glob("*.jsonl")
             for line in f.read_bytes().splitlines()]
    assert len(lines) == 1 and len(lines[0]) < 4096
    assert route.requests["logs_413"] == 1 and route.records["claude-code"] == 2
