"""Sending an encoded OTLP request: one attempt, its outcome classified; never a retry of its own.

The durable queue (``collector.exporters.queue``) is the only retry loop, so a send here is exactly one
attempt and its failure says whether trying again can help:

* OTLP/HTTP (``HttpSender``, urllib3, retries off): 2xx is success. No response (refused, reset, timed
  out), 429 and 5xx are worth retrying; a ``Retry-After`` of 429/503 is passed on as the least wait.
  401/403/404/408 are retried as well: a wrong token or path is fixed by the user and the queue keeps the
  data meanwhile. Every other 4xx (400 bad payload, 413 too large, 415...) is permanent: the batch is
  refused for good.
* OTLP/gRPC (``GrpcSender``, the optional ``grpc`` extra): the pre-encoded bytes go through a plain
  unary call (no serialiser, no retry policy in the channel's service config, so no retries: the SDK's
  gRPC exporter, which retries by itself with backoff, is not used). UNAVAILABLE, DEADLINE_EXCEEDED,
  RESOURCE_EXHAUSTED, ABORTED, CANCELLED, UNAUTHENTICATED, PERMISSION_DENIED, UNIMPLEMENTED, INTERNAL
  and UNKNOWN are retried; the rest (INVALID_ARGUMENT...) are permanent.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from typing import Any, Protocol

import urllib3

from collector import __version__
from collector.exporters.base import ExportError
from collector.exporters.otlp_config import SignalConfig

USER_AGENT = f"agent-collector/{__version__}"
_RETRYABLE_4XX = frozenset({401, 403, 404, 408, 429})
_GRPC_METHODS = {
    "logs": "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
    "traces": "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    "metrics": "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
}
_GRPC_RETRYABLE = frozenset({
    "UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED", "CANCELLED", "UNAUTHENTICATED",
    "PERMISSION_DENIED", "UNIMPLEMENTED", "INTERNAL", "UNKNOWN",
})  # fmt: skip


class Sender(Protocol):
    endpoint: str

    def send(self, body: bytes, what: str) -> None:
        """Deliver one encoded request or raise ExportError (``retryable`` says whether to try again)."""

    def close(self) -> None: ...


def retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds (an HTTP date is not honoured)."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return min(max(seconds, 0.0), 300.0)


@dataclass(slots=True)
class HttpSender:
    """OTLP/HTTP with protobuf bodies (``application/x-protobuf``), optionally gzip'd."""

    endpoint: str
    headers: dict[str, str]
    timeout_s: float
    compression: str | None = None
    last_status: int | None = None
    _pool: urllib3.PoolManager = field(init=False)

    def __post_init__(self) -> None:
        self._pool = urllib3.PoolManager(num_pools=2, maxsize=1, retries=False)
        self.headers = {
            "Content-Type": "application/x-protobuf",
            "User-Agent": USER_AGENT,
            **({"Content-Encoding": "gzip"} if self.compression == "gzip" else {}),
            **self.headers,
        }

    def send(self, body: bytes, what: str) -> None:
        if self.compression == "gzip":
            body = gzip.compress(body, compresslevel=6)
        self.last_status = None
        try:
            response = self._pool.request(
                "POST", self.endpoint, body=body, headers=self.headers, timeout=self.timeout_s,
                retries=False, redirect=False, preload_content=True,
            )
        except urllib3.exceptions.HTTPError as exc:
            raise ExportError(f"{what} to {self.endpoint} failed: no response ({type(exc).__name__})") from exc
        status = self.last_status = response.status
        if 200 <= status < 300:
            return
        retryable = status >= 500 or status in _RETRYABLE_4XX
        wait = retry_after(response.headers.get("Retry-After")) if status in (429, 503) else None
        raise ExportError(f"{what} to {self.endpoint} failed: HTTP {status}", retryable=retryable,
                          retry_after=wait)

    def close(self) -> None:
        self._pool.clear()


class GrpcSender:
    """OTLP/gRPC: the encoded request as the unary call's raw bytes."""

    def __init__(self, config: SignalConfig) -> None:
        try:
            import grpc
        except ImportError as exc:
            raise ExportError(
                "OTLP protocol grpc needs the optional extra: pip install 'agent-collector[grpc]'",
                retryable=False,
            ) from exc
        self._grpc: Any = grpc
        self.endpoint = config.endpoint
        target = config.endpoint.split("://", 1)[-1].rstrip("/")
        insecure = config.insecure if config.insecure is not None else config.endpoint.startswith("http://")
        options = [("grpc.enable_retries", 0), ("grpc.primary_user_agent", USER_AGENT)]
        compression = grpc.Compression.Gzip if config.compression == "gzip" else grpc.Compression.NoCompression
        if insecure:
            self._channel = grpc.insecure_channel(target, options=options, compression=compression)
        else:
            credentials = grpc.ssl_channel_credentials()
            self._channel = grpc.secure_channel(target, credentials, options=options, compression=compression)
        self._call = self._channel.unary_unary(_GRPC_METHODS[config.signal])
        self._metadata = tuple((k.lower(), v) for k, v in config.headers.items())
        self._timeout = config.timeout_s

    def send(self, body: bytes, what: str) -> None:
        try:
            self._call(body, timeout=self._timeout, metadata=self._metadata)
        except self._grpc.RpcError as exc:
            code = exc.code().name if hasattr(exc, "code") and exc.code() is not None else "UNKNOWN"
            raise ExportError(f"{what} to {self.endpoint} failed: gRPC {code}",
                              retryable=code in _GRPC_RETRYABLE) from exc

    def close(self) -> None:
        self._channel.close()


def make_sender(config: SignalConfig) -> Sender:
    """The sender for one signal, configured only from ``config`` (never from os.environ)."""
    if config.protocol == "grpc":
        return GrpcSender(config)
    return HttpSender(config.endpoint, dict(config.headers), config.timeout_s, config.compression)
