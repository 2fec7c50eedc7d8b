"""OTLP/gRPC without the SDK's exporter: the encoded request goes as the raw bytes of one unary call to a
real gRPC server, which decodes it with opentelemetry-proto; a failure is one attempt (the channel does
not retry), UNAVAILABLE is retryable and INVALID_ARGUMENT permanent. Needs the ``grpc`` extra."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from typing import Any

import pytest

grpc = pytest.importorskip("grpc")

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (  # noqa: E402
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from collector.exporters.base import ExportError  # noqa: E402
from collector.exporters.otlp_common import ResourceCache  # noqa: E402
from collector.exporters.otlp_config import SignalConfig  # noqa: E402
from collector.exporters.otlp_logs import LogEncoder  # noqa: E402
from collector.exporters.otlp_send import GrpcSender, make_sender  # noqa: E402

METHOD = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"


class Server:
    def __init__(self) -> None:
        self.requests: list[ExportLogsServiceRequest] = []
        self.metadata: list[dict[str, str]] = []
        self.fail_with: Any = None
        self.calls = 0
        handler = grpc.method_handlers_generic_handler(
            "opentelemetry.proto.collector.logs.v1.LogsService",
            {"Export": grpc.unary_unary_rpc_method_handler(self.export)},
        )
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def export(self, body: bytes, context: Any) -> bytes:
        self.calls += 1
        if self.fail_with is not None:
            context.abort(self.fail_with, "refused")
        self.requests.append(ExportLogsServiceRequest.FromString(body))
        self.metadata.append(dict(context.invocation_metadata()))
        return bytes(ExportLogsServiceResponse().SerializeToString())


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.server.stop(0)


def sender(server: Server) -> GrpcSender:
    config = SignalConfig("logs", f"http://127.0.0.1:{server.port}", protocol="grpc", headers={"x-team": "ai"},
                          timeout_s=5)
    made = make_sender(config)
    assert isinstance(made, GrpcSender)
    return made


def test_the_encoded_request_arrives_decodable(server: Server) -> None:
    entries = [{"event.name": "user.prompt", "event.id": "e1", "time_unix_nano": 10**18, "gen_ai.agent.type": "x"}]
    body, count, _ = LogEncoder(ResourceCache()).request(entries)
    s = sender(server)
    s.send(body, "logs")
    s.close()
    [request] = server.requests
    [record] = request.resource_logs[0].scope_logs[0].log_records
    assert count == 1 and record.event_name == "user.prompt" and server.metadata[0]["x-team"] == "ai"


@pytest.mark.parametrize(("code", "retryable"), [("UNAVAILABLE", True), ("INVALID_ARGUMENT", False)])
def test_a_failure_is_one_attempt_classified(server: Server, code: str, retryable: bool) -> None:
    server.fail_with = getattr(grpc.StatusCode, code)
    s = sender(server)
    with pytest.raises(ExportError, match=f"gRPC {code}") as caught:
        s.send(ExportLogsServiceRequest().SerializeToString(), "logs")
    s.close()
    assert caught.value.retryable is retryable and server.calls == 1
