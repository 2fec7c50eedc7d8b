"""The OTLP/HTTP receiver of the real daemon's ingest listener: the OpenTelemetry SDK's own OTLP/HTTP
exporters (protobuf) and hand-made OTLP/JSON requests as clients, hostile bodies, and kill -9 after the 200."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from support.otlp_requests import SPAN_ID, TRACE_ID, logs_request
from support.robust import Daemon
from support.waits import wait_for


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    running = Daemon(tmp_path_factory.mktemp("otlp")).start()
    yield running
    running.stop()


def _token(daemon: Daemon) -> str:
    return (daemon.data / "state" / "ingest.token").read_text().strip()


def _post(daemon: Daemon, path: str, body: bytes, headers: dict[str, str] | None = None,
          token: bool = True, chunked: bool = False) -> tuple[int, str, bytes]:
    sent = {"Content-Type": "application/x-protobuf", **(headers or {})}
    if token:
        sent["X-Agent-Collector-Token"] = _token(daemon)
    connection = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=20)
    try:
        if chunked:
            connection.request("POST", path, body=iter([body[: len(body) // 2], body[len(body) // 2:]]),
                               headers=sent, encode_chunked=True)
        else:
            connection.request("POST", path, body=body, headers=sent)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        connection.close()


def _json_logs(service: str) -> bytes:
    return orjson.dumps({"resourceLogs": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeLogs": [{"scope": {"name": "com.anthropic.claude_code", "version": "2.1.29"},
                       "logRecords": [{"timeUnixNano": "1796000000000000000", "traceId": TRACE_ID, "spanId": SPAN_ID,
                                       "body": {"stringValue": "claude_code.api_request"},
                                       "attributes": [{"key": "input_tokens", "value": {"intValue": "7"}}]}]}]}]})


def _spooled(daemon: Daemon, agent: str) -> list[dict[str, Any]]:
    folder = daemon.data / "spool" / "otlp" / agent
    return [orjson.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_bytes().splitlines()
            if line.strip()]


def _not_parsed(daemon: Daemon, agent: str, kind: str) -> int:
    status = daemon.status_file()
    return int(status.get("pipeline", {}).get("unreadable", {}).get(f"{agent}: {kind} records are not parsed yet", 0))


def test_the_sdk_exporters_deliver_logs_traces_and_metrics_in_protobuf(daemon: Daemon) -> None:
    """The OpenTelemetry SDK's OTLP/HTTP exporters, with the token as a header, get a success for every
    signal; each record reaches the parser boundary (counted as not parsed yet by Gemini CLI's parser, which
    reads none of its telemetry)."""
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.resources import Resource as SdkResource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    base, headers = f"http://127.0.0.1:{daemon.port}", {"X-Agent-Collector-Token": _token(daemon)}
    resource = SdkResource.create({"service.name": "gemini-cli"})
    logs = LoggerProvider(resource=resource)
    logs.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(f"{base}/v1/logs", headers=headers)))
    from opentelemetry._logs import LogRecord as ApiLogRecord
    logs.get_logger("claude").emit(ApiLogRecord(body="claude_code.api_request", attributes={"output_tokens": 9}))
    traces = TracerProvider(resource=resource)
    traces.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{base}/v1/traces", headers=headers)))
    with traces.get_tracer("claude").start_as_current_span("claude_code.interaction"):
        pass
    reader = InMemoryMetricReader()
    meters = MeterProvider(resource=resource, metric_readers=[reader])
    meters.get_meter("claude").create_counter("claude_code.token.usage").add(42, {"type": "output"})
    data = reader.get_metrics_data()
    assert OTLPMetricExporter(f"{base}/v1/metrics", headers=headers).export(data).name == "SUCCESS"
    logs.shutdown()
    traces.shutdown()

    answer = daemon.get("/v1/status")["otlp"]
    assert {k: answer["requests"].get(k) for k in ("logs_200", "traces_200", "metrics_200")} == \
        {"logs_200": 1, "traces_200": 1, "metrics_200": 1}
    signals = sorted(line["event"] for line in _spooled(daemon, "gemini-cli"))
    assert signals == ["logs", "metrics", "traces"]
    for kind in ("otel_log", "otel_span", "otel_metric"):
        wait_for(lambda k=kind: _not_parsed(daemon, "gemini-cli", k) >= 1, 30, f"a {kind} at the parser")  # type: ignore[misc]


def test_json_and_chunked_protobuf_are_accepted_and_answered_in_kind(daemon: Daemon) -> None:
    status, media, body = _post(daemon, "/v1/logs", _json_logs("qwen-code"), {"Content-Type": "application/json"})
    assert (status, media, orjson.loads(body)) == (200, "application/json", {})
    status, media, body = _post(daemon, "/v1/logs", logs_request("qwen-code", 3), chunked=True)
    assert (status, media) == (200, "application/x-protobuf")
    assert ExportLogsServiceResponse.FromString(body).HasField("partial_success") is False
    gz = gzip.compress(logs_request("qwen-code", 2))
    assert _post(daemon, "/v1/logs", gz, {"Content-Encoding": "gzip"})[0] == 200
    lines = _spooled(daemon, "qwen-code")
    assert len(lines) == 3
    json_line = lines[0]["payload"]["export"]["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    proto_line = lines[1]["payload"]["export"]["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    assert json_line["traceId"] == proto_line["traceId"] == TRACE_ID  # protobuf's bytes come out hex, as in JSON
    assert proto_line["spanId"] == SPAN_ID


def test_an_unknown_service_is_counted_and_named_in_partial_success(daemon: Daemon) -> None:
    status, _, body = _post(daemon, "/v1/logs", logs_request("some-other-tool", 4))
    assert status == 200
    partial = ExportLogsServiceResponse.FromString(body).partial_success
    assert partial.rejected_log_records == 4
    assert "some-other-tool" in partial.error_message
    assert daemon.get("/v1/status")["otlp"]["unknown_services"]["some-other-tool"] == 4
    assert not (daemon.data / "spool" / "otlp" / "some-other-tool").exists()


OTHER_USER_POST = r"""
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
c.request("POST", "/v1/logs", body=sys.stdin.buffer.read(), headers={"Content-Type": "application/x-protobuf"})
print(c.getresponse().status)
"""


def test_without_the_token_only_our_own_user_may_post_telemetry(daemon: Daemon) -> None:
    """The agents' telemetry settings hold no secret: a client socket our uid owns posts OTLP without
    the token; another user's gets 401, and the hooks' route still needs the token from everyone."""
    body = logs_request("claude-code", 1)
    before = len(_spooled(daemon, "claude-code"))
    assert _post(daemon, "/v1/logs", body, token=False)[0] == 200
    assert len(_spooled(daemon, "claude-code")) == before + 1
    hook = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=20)
    hook.request("POST", "/v1/hooks/claude-code", body=b"{}", headers={"Content-Type": "application/json"})
    assert hook.getresponse().status == 401
    hook.close()
    if os.getuid() != 0:
        pytest.skip("another uid needs root")
    python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "/usr/bin/python3"  # nobody may run it
    other = subprocess.run([python, "-c", OTHER_USER_POST, str(daemon.port)], input=body,
                           capture_output=True, user=65534, cwd="/", timeout=60, check=True)
    assert other.stdout.strip() == b"401"
    assert len(_spooled(daemon, "claude-code")) == before + 1


def test_a_browser_is_refused(daemon: Daemon) -> None:
    body = logs_request("claude-code", 1)
    assert _post(daemon, "/v1/logs", body, {"Origin": "https://evil.example"})[0] == 403
    assert _post(daemon, "/v1/traces", body, {"Sec-Fetch-Mode": "no-cors"})[0] == 403


def test_hostile_bodies_get_the_otlp_status_and_the_daemon_lives(daemon: Daemon) -> None:
    before = len(_spooled(daemon, "claude-code"))
    status, media, body = _post(daemon, "/v1/logs", os.urandom(4096) + b"\xff" * 64)
    assert status == 400 and media == "application/x-protobuf" and body  # a google.rpc.Status
    assert _post(daemon, "/v1/logs", b'{"resourceLogs": [', {"Content-Type": "application/json"})[0] == 400
    assert _post(daemon, "/v1/logs", b'{"resourceLogs": [1, 2]}', {"Content-Type": "application/json"})[0] == 400
    assert _post(daemon, "/v1/logs", logs_request("claude-code", 1), {"Content-Type": "text/plain"})[0] == 415
    assert _post(daemon, "/v1/logs", logs_request("claude-code", 1), {"Content-Encoding": "br"})[0] == 415
    bomb = gzip.compress(b"\x00" * (64 * 1024 * 1024))  # 64 MiB of zeros in about 64 KiB
    assert len(bomb) < 200_000
    assert _post(daemon, "/v1/logs", bomb, {"Content-Encoding": "gzip"})[0] == 413
    assert _post(daemon, "/v1/logs", gzip.compress(b"not protobuf")[:-6], {"Content-Encoding": "gzip"})[0] == 400
    assert _announced(daemon, 20 * 1024 * 1024) == 413  # refused before a byte of the body is read
    assert _post(daemon, "/v1/logs", _nested(100), {"Content-Type": "application/json"})[0] == 400  # unstorable
    assert _post(daemon, "/v1/logs", _nested(300), {"Content-Type": "application/json"})[0] == 400  # too deep
    assert daemon.get("/v1/status")["otlp"]["requests"]["logs_413"] >= 1
    assert len(_spooled(daemon, "claude-code")) == before
    assert _post(daemon, "/v1/logs", logs_request("claude-code", 1))[0] == 200  # still serving
    assert daemon.proc is not None and daemon.proc.poll() is None


def _nested(levels: int) -> bytes:
    """A log record whose body nests ``levels`` key/value lists (four JSON levels each)."""
    value: dict[str, Any] = {"stringValue": "x"}
    for _ in range(levels):
        value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    record = {"body": value}
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "claude-code"}}]}
    try:
        return orjson.dumps({"resourceLogs": [{"resource": resource, "scopeLogs": [{"logRecords": [record]}]}]})
    except orjson.JSONEncodeError:  # deeper than orjson writes: the text by hand
        head = (b'{"resourceLogs": [{"resource": ' + orjson.dumps(resource)
                + b', "scopeLogs": [{"logRecords": [{"body": ')
        return head + b'{"kvlistValue": {"values": [{"key": "k", "value": ' * levels + b'{"stringValue": "x"}' \
            + b'}]}}' * levels + b'}]}]}]}'


def _announced(daemon: Daemon, length: int) -> int:
    """Send only the head of a request announcing ``length`` bytes; the status answered."""
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as sock:
        head = (f"POST /v1/logs HTTP/1.1\r\nHost: 127.0.0.1:{daemon.port}\r\nContent-Type: application/x-protobuf\r\n"
                f"X-Agent-Collector-Token: {_token(daemon)}\r\nContent-Length: {length}\r\n\r\n")
        sock.sendall(head.encode())
        answer = sock.recv(4096)
    return int(answer.split(b" ", 2)[1])


def test_kill_9_after_the_200_loses_nothing(tmp_path: Path) -> None:
    """Every request answered 200 is in the spool when the daemon is killed at once; the restarted daemon
    reads it all (the telemetry stream's committed position reaches the end of the spool file)."""
    daemon = Daemon(tmp_path).start()
    bodies = [logs_request("codex_exec", 5, marker=f"r{n}") for n in range(30)]
    for body in bodies:
        assert _post(daemon, "/v1/logs", body)[0] == 200
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait(10)
    digests = [line["payload"]["digest"] for line in _spooled(daemon, "codex")]
    assert digests == [hashlib.sha256(b).hexdigest()[:32] for b in bodies]
    daemon.start()
    try:
        spool = next((daemon.data / "spool" / "otlp" / "codex").glob("*.jsonl"))
        wait_for(lambda: _committed(daemon, spool) == spool.stat().st_size, 30, "the spool read to its end")
    finally:
        daemon.stop()


def _committed(daemon: Daemon, spool: Path) -> int:
    with sqlite3.connect(f"file:{daemon.data / 'state' / 'checkpoints.sqlite'}?mode=ro", uri=True) as db:
        row = db.execute("SELECT value FROM positions WHERE stream = ?", (f"codex:telemetry:{spool}",)).fetchone()
    return int(orjson.loads(row[0])["offset"]) if row else -1
