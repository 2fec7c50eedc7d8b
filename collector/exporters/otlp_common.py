"""What the three OTLP exporters share: SDK exporter construction, resources, error classification.

The SDK's OTLP exporters answer only SUCCESS or FAILURE. To tell "backend down, keep retrying" from
"backend refused this payload for good" (HTTP 400, 413, 415...), the HTTP exporters get a ``requests``
session that remembers the last status code.

The SDK's own retries are off: the SDK's HTTP client (opentelemetry-exporter-otlp-common 0.66b2) retries
connection errors and HTTP 429/502/503/504 with 1 s, 2 s, 4 s... backoff inside one ``export`` call, up to
its timeout. Our session raises :class:`OneShot` instead of returning such a response or a connection
error; the SDK does not retry an error it does not know, so every ``export`` is one attempt and the
durable queue, the only retry loop, decides when to try again.
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import requests
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from collector import __version__
from collector.exporters.base import ExportError
from collector.exporters.otlp_config import SignalConfig

SCOPE = InstrumentationScope("agent-collector", __version__)
# kept retryable although 4xx: a wrong token or path is fixed by the user, and the queue keeps the data
_RETRYABLE_4XX = frozenset({401, 403, 404, 408, 429})
_SDK_RETRIES = frozenset({429, 502, 503, 504})  # what the SDK's HTTP client would retry by itself


class OneShot(Exception):  # noqa: N818 - what it does, not an error class of ours
    """A failed attempt in a form the SDK does not retry (it retries only connection errors and 429/5xx)."""


class _OneShotSession(requests.Session):
    def __init__(self, tracker: StatusTracker) -> None:
        super().__init__()
        self._tracker = tracker

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:
        try:
            response = super().request(*args, **kwargs)
        except requests.RequestException as exc:
            raise OneShot(f"{type(exc).__name__}: {exc}") from exc
        self._tracker.last_status = response.status_code
        if response.status_code in _SDK_RETRIES:
            raise OneShot(f"HTTP {response.status_code}")
        return response


class StatusTracker:
    """A ``requests`` session that records the status of the last response and never lets the SDK retry."""

    def __init__(self) -> None:
        self.last_status: int | None = None
        self.session: requests.Session = _OneShotSession(self)

    def reset(self) -> None:
        self.last_status = None

    def failure(self, what: str, endpoint: str) -> ExportError:
        status = self.last_status
        if status is None:
            return ExportError(f"{what} to {endpoint} failed: no response (endpoint down or timed out)")
        retryable = status >= 500 or status in _RETRYABLE_4XX
        return ExportError(f"{what} to {endpoint} failed: HTTP {status}", retryable=retryable)


@dataclass(slots=True)
class SdkExporter:
    """An SDK exporter and the tracker that explains its failures (None for gRPC)."""

    exporter: Any
    tracker: StatusTracker | None
    endpoint: str

    def failure(self, what: str) -> ExportError:
        if self.tracker is None:
            return ExportError(f"{what} to {self.endpoint} failed")
        return self.tracker.failure(what, self.endpoint)

    def reset(self) -> None:
        if self.tracker is not None:
            self.tracker.reset()

    def answered(self) -> bool:
        """Whether the last export reached the backend (an HTTP status came back)."""
        return self.tracker is not None and self.tracker.last_status is not None


def drop_unencodable(items: Sequence[Any], encode: Callable[[Sequence[Any]], Any]) -> tuple[list[Any], int]:
    """The SDK answers FAILURE, as for a backend that is down, when it cannot encode a batch. After a
    failure without a response, check: if ``encode`` (the SDK's protobuf encoder) fails on the batch, the
    items it fails on alone are poison, a permanent error; they are dropped (counted by the caller) and
    the rest goes on. Returns (the encodable items, how many were dropped)."""
    try:
        encode(items).SerializeToString()
        return list(items), 0
    except Exception:  # noqa: BLE001 - whatever the encoder raises, find the item that causes it
        pass
    good = []
    for item in items:
        try:
            encode([item]).SerializeToString()
        except Exception:  # noqa: BLE001
            continue
        good.append(item)
    return good, len(items) - len(good)


def _grpc_module(signal: str) -> Any:
    try:
        if signal == "logs":
            from opentelemetry.exporter.otlp.proto.grpc import _log_exporter as module
        elif signal == "traces":
            from opentelemetry.exporter.otlp.proto.grpc import trace_exporter as module
        else:
            from opentelemetry.exporter.otlp.proto.grpc import metric_exporter as module
    except ImportError as exc:
        raise ExportError(
            "OTLP protocol grpc needs the optional extra: pip install 'agent-collector[grpc]'",
            retryable=False,
        ) from exc
    return module


def make_sdk_exporter(config: SignalConfig, **extra: Any) -> SdkExporter:
    """The SDK's OTLP exporter for one signal, configured only from ``config`` (never from os.environ)."""
    if config.protocol == "grpc":
        module = _grpc_module(config.signal)
        cls = {
            "logs": "OTLPLogExporter",
            "traces": "OTLPSpanExporter",
            "metrics": "OTLPMetricExporter",
        }[config.signal]
        from opentelemetry.exporter.otlp.proto.grpc import Compression as GrpcCompression

        insecure = config.insecure if config.insecure is not None else config.endpoint.startswith("http://")
        grpc_exporter = getattr(module, cls)(
            endpoint=config.endpoint,
            insecure=insecure,
            headers=dict(config.headers) or None,
            timeout=config.timeout_s,
            compression=GrpcCompression.Gzip
            if config.compression == "gzip"
            else GrpcCompression.NoCompression,
            **extra,
        )
        return SdkExporter(grpc_exporter, None, config.endpoint)
    from opentelemetry.exporter.otlp.proto.http import Compression

    compression = Compression.Gzip if config.compression == "gzip" else Compression.NoCompression
    tracker = StatusTracker()
    kwargs: dict[str, Any] = {
        "endpoint": config.endpoint,
        "headers": dict(config.headers),
        "timeout": config.timeout_s,
        "compression": compression,
        "session": tracker.session,
        **extra,
    }
    if config.signal == "logs":
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

        exporter: Any = OTLPLogExporter(**kwargs)
    elif config.signal == "traces":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(**kwargs)
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        exporter = OTLPMetricExporter(**kwargs)
    return SdkExporter(exporter, tracker, config.endpoint)


class ResourceCache:
    """One SDK ``Resource`` per (host.name, user.id) seen in entries, plus configured extras."""

    def __init__(self, extra: Mapping[str, str] | None = None) -> None:
        self.extra = dict(extra or {})
        self._cache: dict[tuple[str, str], Resource] = {}
        self._host = socket.gethostname()
        try:
            self._user = getpass.getuser()
        except (KeyError, OSError):
            self._user = "unknown"

    def key(self, entry: Mapping[str, Any]) -> tuple[str, str]:
        return (str(entry.get("host.name") or self._host), str(entry.get("user.id") or self._user))

    def get(self, key: tuple[str, str]) -> Resource:
        resource = self._cache.get(key)
        if resource is None:
            attributes = {
                **self.extra,
                "service.name": "agent-collector",
                "service.version": __version__,
                "host.name": key[0],
                "user.id": key[1],
            }
            resource = self._cache[key] = Resource.create(attributes)
        return resource

    def for_entry(self, entry: Mapping[str, Any]) -> Resource:
        return self.get(self.key(entry))
