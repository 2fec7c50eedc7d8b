"""One attempt per send, its failure classified: against a real OTLP/HTTP receiver, 2xx delivers, no
response / 429 / 5xx / 401-404-408 are retryable (with the Retry-After of 429 and 503 passed on), other
4xx are permanent, and the sender itself never retries (the receiver sees exactly one request)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from support.otlp_receiver import OtlpReceiver

from collector.exporters.base import ExportError
from collector.exporters.otlp_config import SignalConfig
from collector.exporters.otlp_send import HttpSender, make_sender

BODY = ExportLogsServiceRequest().SerializeToString()


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver().start()
    yield r
    r.stop()


def sender(receiver: OtlpReceiver, compression: str | None = None) -> HttpSender:
    config = SignalConfig("logs", f"{receiver.endpoint}/v1/logs", headers={"x-team": "ai"}, timeout_s=2,
                          compression=compression)
    made = make_sender(config)
    assert isinstance(made, HttpSender)
    return made


def test_success_sends_protobuf_with_the_configured_headers(receiver: OtlpReceiver) -> None:
    s = sender(receiver, "gzip")
    s.send(BODY, "logs")
    headers = {k.lower(): v for k, v in receiver.received.headers[0].items()}
    assert headers["content-type"] == "application/x-protobuf" and headers["x-team"] == "ai"
    assert headers["content-encoding"] == "gzip" and len(receiver.received.logs) == 1


@pytest.mark.parametrize(("status", "retry_after", "retryable", "wait"), [
    (503, "7", True, 7.0), (429, "2.5", True, 2.5), (500, None, True, None), (502, "9", True, None),
    (401, None, True, None), (404, None, True, None), (408, None, True, None),
    (400, None, False, None), (413, None, False, None), (415, None, False, None),
])  # fmt: skip
def test_failures_are_classified_and_tried_once(
    receiver: OtlpReceiver, status: int, retry_after: str | None, retryable: bool, wait: float | None
) -> None:
    receiver.fail_with, receiver.retry_after = status, retry_after
    with pytest.raises(ExportError, match=f"HTTP {status}") as caught:
        sender(receiver).send(BODY, "logs")
    assert caught.value.retryable is retryable and caught.value.retry_after == wait
    assert receiver.requests == 1


def test_no_response_is_retryable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = HttpSender(f"http://127.0.0.1:{port}/v1/logs", {}, 1.0)
    with pytest.raises(ExportError, match="no response") as caught:
        down.send(BODY, "logs")
    assert caught.value.retryable
