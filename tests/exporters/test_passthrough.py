"""The pass-through (issue 26 point 5): a user had their own OTLP backend in Claude Code's settings;
``install --telemetry`` points Claude Code at us and saves that backend; the real daemon then forwards
the agent's telemetry, as our receiver took it, unchanged to the user's backend (a real OTLP/HTTP server,
tests/support/otlp_receiver.py), through a durable queue: a backend that was down gets it once it is up."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from support.otlp_receiver import OtlpReceiver
from support.otlp_requests import logs_request
from support.robust import Daemon
from support.waits import wait_for


@pytest.fixture
def backend() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture
def daemon(tmp_path: Path, backend: OtlpReceiver) -> Iterator[Daemon]:
    running = Daemon(tmp_path)
    settings = running.home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"env": {"CLAUDE_CODE_ENABLE_TELEMETRY": "1",
                                            "OTEL_EXPORTER_OTLP_ENDPOINT": backend.endpoint,
                                            "OTEL_EXPORTER_OTLP_HEADERS": "x-team-key=secret-7"}}))
    subprocess.run([sys.executable, "-m", "collector", "install", "--home", str(running.home), "--agent",
                    "claude-code", "--telemetry"], env=running.env, check=True, capture_output=True, timeout=120)
    env = json.loads(settings.read_text())["env"]
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == f"http://127.0.0.1:{running.port}"  # now ours
    running.start()
    yield running
    running.stop()


def _post(daemon: Daemon, path: str, body: bytes, media: str) -> int:
    """As the agent posts: no token (a client of the daemon's own user)."""
    connection = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=20)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": media})
        return connection.getresponse().status
    finally:
        connection.close()


def test_the_users_backend_receives_the_agents_records_unchanged(daemon: Daemon, backend: OtlpReceiver) -> None:
    sent = logs_request("claude-code", 3, marker="forwarded")
    assert _post(daemon, "/v1/logs", sent, "application/x-protobuf") == 200
    wait_for(lambda: len(backend.received.logs) == 1, timeout=20, what="the forwarded request")
    assert backend.received.logs[0] == ExportLogsServiceRequest.FromString(sent)  # every field, equal
    assert backend.received.headers[0].get("x-team-key") == "secret-7"  # the user's own headers
    json_body = orjson.dumps({"resourceLogs": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "claude-code"}}]},
        "scopeLogs": [{"scope": {"name": "com.anthropic.claude_code", "version": "2.1.29"},
                       "logRecords": [{"timeUnixNano": "1796000000000000000", "eventName": "claude_code.api_request",
                                       "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
                                       "body": {"stringValue": "claude_code.api_request"},
                                       "attributes": [{"key": "output_tokens", "value": {"intValue": "812"}}]}]}]}]})
    assert _post(daemon, "/v1/logs", json_body, "application/json") == 200
    wait_for(lambda: len(backend.received.json_bodies) == 2, timeout=20, what="the second forwarded request")
    assert backend.received.json_bodies[1] == orjson.loads(json_body)  # the JSON as the agent sent it
    spooled = list((daemon.data / "spool" / "otlp" / "claude-code").glob("*.jsonl"))
    assert sum(len(f.read_bytes().splitlines()) for f in spooled) == 2  # and ours kept them too


def test_a_backend_that_was_down_gets_it_when_it_is_up(daemon: Daemon, backend: OtlpReceiver) -> None:
    backend.fail_with = 503
    assert _post(daemon, "/v1/logs", logs_request("claude-code", 2, marker="later"), "application/x-protobuf") == 200
    wait_for(lambda: backend.requests >= 2, timeout=30, what="a retry against the failing backend")
    backend.fail_with = None
    wait_for(lambda: len(backend.received.logs) == 1, timeout=60, what="the retried request")
    assert [r["attributes"]["marker"] for r in backend.logs()] == ["later", "later"]
    forward = daemon.get("/v1/status")["otlp_forward"]["claude-code"]
    assert forward["delivered"] == 1 and forward["failures"] >= 1 and forward["inner"]["sent"] == 1
