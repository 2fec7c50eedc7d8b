"""OTLP settings: the standard ``OTEL_EXPORTER_OTLP_*`` environment plus the ``[otlp]`` config table.

Returns one :class:`BackendConfig` per destination. The environment configures the backend named
``default`` and wins over the same keys in the file; ``[[otlp.backends]]`` adds more destinations. Nothing
configured means no OTLP export at all. Keys are documented in docs/otlp.md.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from collector.exporters.semconv import DEFAULT, Semconv
from collector.exporters.semconv import ENV as SEMCONV_ENV
from collector.exporters.semconv import from_env as semconv_from_env
from collector.paths import expand_template

SIGNALS = ("logs", "traces", "metrics")
PROTOCOLS = ("http/protobuf", "grpc")
DEFAULT_PROTOCOL = "http/protobuf"
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_QUEUE_MB = 512
DEFAULT_IDLE_S = 300.0
DEFAULT_GRACE_S = 3.0
_HTTP_PATHS = {"logs": "v1/logs", "traces": "v1/traces", "metrics": "v1/metrics"}
_ENV_SWITCH = {
    "logs": "OTEL_LOGS_EXPORTER",
    "traces": "OTEL_TRACES_EXPORTER",
    "metrics": "OTEL_METRICS_EXPORTER",
}


class OtlpConfigError(ValueError):
    """The OTLP settings cannot be used; the message names the key."""


@dataclass(frozen=True, slots=True)
class SignalConfig:
    signal: str
    endpoint: str
    protocol: str = DEFAULT_PROTOCOL
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = DEFAULT_TIMEOUT_S
    compression: str | None = None  # "gzip" or None
    insecure: bool | None = None  # gRPC only; None: from the scheme


@dataclass(frozen=True, slots=True)
class BackendConfig:
    name: str
    signals: dict[str, SignalConfig]
    queue_cap_bytes: int = DEFAULT_QUEUE_MB * 1024 * 1024
    turn_idle_timeout_s: float = DEFAULT_IDLE_S
    turn_grace_s: float = DEFAULT_GRACE_S
    resource_attributes: dict[str, str] = field(default_factory=dict)
    semconv: Semconv = DEFAULT  # OTEL_SEMCONV_STABILITY_OPT_IN: which GenAI names (collector.exporters.semconv)


def parse_headers(text: str) -> dict[str, str]:
    """``k1=v1,k2=v2`` with URL-encoded values (the W3C baggage-like format of the OTLP spec)."""
    out: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        if "=" not in item:
            raise OtlpConfigError(f"bad OTLP header {item.strip()!r}: expected key=value")
        key, value = item.split("=", 1)
        out[urllib.parse.unquote(key.strip()).lower()] = urllib.parse.unquote(value.strip())
    return out


def signal_url(base: str, signal: str, protocol: str) -> str:
    """The per-signal URL for a base endpoint (HTTP appends ``/v1/<signal>``, gRPC uses the base)."""
    if protocol == "grpc":
        return base
    return base.rstrip("/") + "/" + _HTTP_PATHS[signal]


def _timeout_from_env(value: str, name: str) -> float:
    try:
        return float(value) / 1000.0  # the spec says milliseconds
    except ValueError as exc:
        raise OtlpConfigError(f"{name}={value!r} is not a number of milliseconds") from exc


def _float(table: Mapping[str, Any], key: str, default: float, where: str) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise OtlpConfigError(f"{where}.{key} must be a non-negative number, not {value!r}")
    return float(value)


def _check_protocol(value: str, where: str) -> str:
    value = value.strip().lower()
    if value == "http/json":
        raise OtlpConfigError(f"{where}: protocol http/json is not supported; use http/protobuf or grpc")
    if value not in PROTOCOLS:
        raise OtlpConfigError(f"{where}: unknown protocol {value!r} (http/protobuf or grpc)")
    return value


def _expand_headers(raw: Mapping[str, Any], env: Mapping[str, str], where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(value, str | int | float):
            raise OtlpConfigError(f"{where}.headers.{key} must be a string")
        out[str(key).lower()] = expand_template(str(value), Path("~"), env)
    return out


def _file_backend(
    table: Mapping[str, Any], defaults: Mapping[str, Any], env: Mapping[str, str], where: str
) -> dict:
    """Flatten one backend table (inheriting ``defaults``) into plain settings per signal."""
    merged = {**defaults, **table}
    enabled_list = merged.get("signals", list(SIGNALS))
    if not isinstance(enabled_list, list) or any(s not in SIGNALS for s in enabled_list):
        raise OtlpConfigError(f"{where}.signals must be a list of {', '.join(SIGNALS)}")
    base: dict[str, Any] = {
        "endpoint": merged.get("endpoint"),
        "protocol": merged.get("protocol", DEFAULT_PROTOCOL),
        "headers": _expand_headers(merged.get("headers") or {}, env, where),
        "timeout_s": _float(merged, "timeout", DEFAULT_TIMEOUT_S, where),
        "compression": merged.get("compression"),
        "insecure": merged.get("insecure"),
    }
    per_signal: dict[str, dict[str, Any]] = {}
    for signal in SIGNALS:
        sub = table.get(signal) if isinstance(table.get(signal), Mapping) else {}
        settings = {**base, "enabled": signal in enabled_list, "endpoint_is_full": False}
        if sub:
            if "enabled" in sub:
                settings["enabled"] = bool(sub["enabled"])
            if "endpoint" in sub:
                settings["endpoint"] = sub["endpoint"]
                settings["endpoint_is_full"] = True
            for key in ("protocol", "compression", "insecure"):
                if key in sub:
                    settings[key] = sub[key]
            if "timeout" in sub:
                settings["timeout_s"] = _float(sub, "timeout", DEFAULT_TIMEOUT_S, f"{where}.{signal}")
            if "headers" in sub:
                settings["headers"] = {**settings["headers"], **_expand_headers(sub["headers"], env, where)}
        per_signal[signal] = settings
    return per_signal


def _apply_env(per_signal: dict[str, dict[str, Any]], env: Mapping[str, str]) -> None:
    """Overlay the standard environment variables (general, then per signal) on the default backend."""
    general_endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    for signal, settings in per_signal.items():
        upper = signal.upper()
        if general_endpoint:
            settings["endpoint"], settings["endpoint_is_full"] = general_endpoint, False
        if env.get(f"OTEL_EXPORTER_OTLP_{upper}_ENDPOINT"):
            settings["endpoint"], settings["endpoint_is_full"] = (
                env[f"OTEL_EXPORTER_OTLP_{upper}_ENDPOINT"],
                True,
            )
        for suffix in ("", f"_{upper}"):
            if env.get(f"OTEL_EXPORTER_OTLP{suffix}_HEADERS"):
                settings["headers"] = {
                    **settings["headers"],
                    **parse_headers(env[f"OTEL_EXPORTER_OTLP{suffix}_HEADERS"]),
                }
            if env.get(f"OTEL_EXPORTER_OTLP{suffix}_PROTOCOL"):
                settings["protocol"] = env[f"OTEL_EXPORTER_OTLP{suffix}_PROTOCOL"]
            if env.get(f"OTEL_EXPORTER_OTLP{suffix}_TIMEOUT"):
                name = f"OTEL_EXPORTER_OTLP{suffix}_TIMEOUT"
                settings["timeout_s"] = _timeout_from_env(env[name], name)
            if env.get(f"OTEL_EXPORTER_OTLP{suffix}_COMPRESSION"):
                settings["compression"] = env[f"OTEL_EXPORTER_OTLP{suffix}_COMPRESSION"]
            if env.get(f"OTEL_EXPORTER_OTLP{suffix}_INSECURE"):
                settings["insecure"] = env[f"OTEL_EXPORTER_OTLP{suffix}_INSECURE"].strip().lower() == "true"
        switch = env.get(_ENV_SWITCH[signal], "").strip().lower()
        if switch == "none":
            settings["enabled"] = False
        elif switch == "otlp":
            settings["enabled"] = True


def _signal_configs(per_signal: Mapping[str, Mapping[str, Any]], where: str) -> dict[str, SignalConfig]:
    out: dict[str, SignalConfig] = {}
    for signal, s in per_signal.items():
        if not s["enabled"] or not s.get("endpoint"):
            continue
        protocol = _check_protocol(str(s["protocol"]), f"{where}.{signal}")
        endpoint = str(s["endpoint"])
        if not s["endpoint_is_full"]:
            endpoint = signal_url(endpoint, signal, protocol)
        compression = s.get("compression")
        if compression is not None:
            compression = str(compression).strip().lower()
            if compression not in ("gzip", "none"):
                raise OtlpConfigError(
                    f"{where}.{signal}: compression must be gzip or none, not {compression!r}"
                )
            compression = None if compression == "none" else compression
        out[signal] = SignalConfig(
            signal=signal,
            endpoint=endpoint,
            protocol=protocol,
            headers=dict(s["headers"]),
            timeout_s=float(s["timeout_s"]),
            compression=compression,
            insecure=s.get("insecure"),
        )
    return out


def _backend(
    name: str, per_signal: dict[str, dict[str, Any]], table: Mapping[str, Any], where: str
) -> BackendConfig:
    queue_mb = _float(table, "queue_max_mb", DEFAULT_QUEUE_MB, where)
    resource = table.get("resource_attributes") or {}
    if not isinstance(resource, Mapping):
        raise OtlpConfigError(f"{where}.resource_attributes must be a table")
    return BackendConfig(
        name=name,
        signals=_signal_configs(per_signal, where),
        queue_cap_bytes=int(queue_mb * 1024 * 1024),
        turn_idle_timeout_s=_float(table, "turn_idle_timeout", DEFAULT_IDLE_S, where),
        turn_grace_s=_float(table, "turn_grace", DEFAULT_GRACE_S, where),
        resource_attributes={str(k): str(v) for k, v in resource.items()},
    )


_COMMON_KEYS = (
    "protocol",
    "headers",
    "timeout",
    "compression",
    "insecure",
    "signals",
    "queue_max_mb",
    "turn_idle_timeout",
    "turn_grace",
    "resource_attributes",
)


def load_otlp_config(config: Mapping[str, Any] | None, env: Mapping[str, str]) -> list[BackendConfig]:
    """All configured backends (may be empty). Raises :class:`OtlpConfigError` on unusable settings."""
    table: Mapping[str, Any] = config or {}
    if table.get("enabled") is False:
        if not any(
            env.get(f"OTEL_EXPORTER_OTLP{s}ENDPOINT") for s in ("_", "_LOGS_", "_TRACES_", "_METRICS_")
        ):
            return []
        table = {k: v for k, v in table.items() if k not in ("endpoint", "backends")}  # the environment only
    defaults = {k: table[k] for k in _COMMON_KEYS if k in table}
    backends: list[BackendConfig] = []
    default_signals = _file_backend(table, {}, env, "otlp")
    _apply_env(default_signals, env)
    default = _backend(str(table.get("name", "default")), default_signals, table, "otlp")
    if default.signals:
        backends.append(default)
    extra = table.get("backends") or []
    if not isinstance(extra, list):
        raise OtlpConfigError("otlp.backends must be an array of tables ([[otlp.backends]])")
    for index, item in enumerate(extra):
        where = f"otlp.backends[{index}]"
        if not isinstance(item, Mapping):
            raise OtlpConfigError(f"{where} must be a table")
        name = str(item.get("name") or f"backend{index + 1}")
        if item.get("enabled") is False:
            continue
        if not item.get("endpoint") and not any(isinstance(item.get(s), Mapping) for s in SIGNALS):
            raise OtlpConfigError(f"{where} ({name}) has no endpoint")
        per_signal = _file_backend(item, defaults, env, where)
        backends.append(_backend(name, per_signal, {**defaults, **item}, where))
    names = [b.name for b in backends]
    if len(set(names)) != len(names):
        raise OtlpConfigError(f"otlp backend names must be unique: {names}")
    mode = semconv_from_env(env.get(SEMCONV_ENV))
    return [replace(b, semconv=mode) for b in backends] if mode != DEFAULT else backends
