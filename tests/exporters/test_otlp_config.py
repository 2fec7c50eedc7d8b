"""OTLP settings: standard environment variables, the [otlp] table, several backends, switches, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import make_paths

from collector.exporters.base import ExportError
from collector.exporters.otlp import build_otlp_exporters
from collector.exporters.otlp_config import OtlpConfigError, load_otlp_config, parse_headers


def test_nothing_configured_means_no_otlp() -> None:
    assert load_otlp_config({}, {}) == []
    assert load_otlp_config({"enabled": False, "backends": []}, {}) == []


def test_general_endpoint_gets_signal_paths_and_per_signal_endpoint_is_used_as_is() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://tempo:4318/custom/traces",
    }
    (backend,) = load_otlp_config({}, env)
    assert backend.name == "default"
    assert backend.signals["logs"].endpoint == "http://collector:4318/v1/logs"
    assert backend.signals["metrics"].endpoint == "http://collector:4318/v1/metrics"
    assert backend.signals["traces"].endpoint == "http://tempo:4318/custom/traces"
    assert all(s.protocol == "http/protobuf" for s in backend.signals.values())


def test_headers_timeout_protocol_and_their_per_signal_variants() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20abc,x-a=1",
        "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "x-a=2",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2500",
        "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "500",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
    }
    (backend,) = load_otlp_config({}, env)
    logs, traces, metrics = (backend.signals[s] for s in ("logs", "traces", "metrics"))
    assert logs.headers == {"authorization": "Bearer abc", "x-a": "2"}
    assert traces.headers == {"authorization": "Bearer abc", "x-a": "1"}
    assert (logs.timeout_s, metrics.timeout_s) == (2.5, 0.5)
    assert traces.protocol == "grpc" and traces.endpoint == "http://c:4318"  # gRPC: no path


def test_environment_wins_over_the_file_and_signals_switch_off() -> None:
    config = {"enabled": True, "endpoint": "http://file:4318", "timeout": 7, "signals": ["logs", "traces"]}
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_LOGS_EXPORTER": "none"}
    (backend,) = load_otlp_config(config, env)
    assert sorted(backend.signals) == ["traces"]
    assert backend.signals["traces"].endpoint == "http://env:4318/v1/traces"
    assert backend.signals["traces"].timeout_s == 7.0


def test_env_endpoint_applies_even_when_the_file_leaves_otlp_disabled() -> None:
    (backend,) = load_otlp_config(
        {"enabled": False, "backends": []}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://e:1"}
    )
    assert sorted(backend.signals) == ["logs", "metrics", "traces"]


def test_several_backends_from_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    config = {
        "enabled": True,
        "timeout": 3,
        "queue_max_mb": 64,
        "backends": [
            {
                "name": "phoenix",
                "endpoint": "http://127.0.0.1:6006",
                "signals": ["traces"],
                "turn_idle_timeout": 60,
            },
            {
                "name": "grafana",
                "endpoint": "https://otlp.example:4318",
                "headers": {"Authorization": "Basic ${GRAFANA_TOKEN}"},
                "compression": "gzip",
                "metrics": {"enabled": False},
                "logs": {"endpoint": "https://logs.example/otlp/v1/logs", "timeout": 9},
            },
        ],
    }
    phoenix, grafana = load_otlp_config(config, {"GRAFANA_TOKEN": "tok"})
    assert (phoenix.name, sorted(phoenix.signals)) == ("phoenix", ["traces"])
    assert phoenix.turn_idle_timeout_s == 60 and phoenix.queue_cap_bytes == 64 * 1024 * 1024
    assert phoenix.signals["traces"].timeout_s == 3
    assert sorted(grafana.signals) == ["logs", "traces"]
    assert grafana.signals["logs"].endpoint == "https://logs.example/otlp/v1/logs"
    assert grafana.signals["logs"].timeout_s == 9
    assert grafana.signals["traces"].headers == {"authorization": "Basic tok"}
    assert grafana.signals["traces"].compression == "gzip"


@pytest.mark.parametrize(
    ("config", "env", "message"),
    [
        ({"endpoint": "http://x", "protocol": "http/json"}, {}, "http/json is not supported"),
        ({"endpoint": "http://x", "protocol": "thrift"}, {}, "unknown protocol"),
        ({"endpoint": "http://x", "timeout": "soon"}, {}, "otlp.timeout"),
        (
            {},
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_TIMEOUT": "ten"},
            "milliseconds",
        ),
        (
            {},
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"},
            "key=value",
        ),
        ({"backends": [{"name": "a"}]}, {}, "has no endpoint"),
        (
            {"backends": [{"name": "a", "endpoint": "http://x"}, {"name": "a", "endpoint": "http://y"}]},
            {},
            "unique",
        ),
        ({"endpoint": "http://x", "signals": ["spans"]}, {}, "signals"),
        ({"endpoint": "http://x", "compression": "zstd"}, {}, "compression"),
    ],
)
def test_bad_settings_are_clear_errors(config: dict, env: dict, message: str) -> None:
    with pytest.raises(OtlpConfigError, match=message):
        load_otlp_config(config, env)


def test_parse_headers_decodes_values() -> None:
    assert parse_headers("a=b%3Dc, B = d ,") == {"a": "b=c", "b": "d"}


def test_build_gives_every_signal_its_own_consumer_of_the_backends_one_log(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    exporters = build_otlp_exporters({"endpoint": "http://127.0.0.1:9", "queue_max_mb": 3}, {}, paths)
    try:
        assert sorted(e.name for e in exporters) == [
            "otlp-default-logs",
            "otlp-default-metrics",
            "otlp-default-traces",
        ]
        assert any(p.name.startswith("seg-") for p in (paths.queue_dir / "otlp" / "default").iterdir())
        for exporter in exporters:
            assert not (paths.queue_dir / exporter.name).exists()
            assert exporter.stats()["cap_bytes"] == 3 * 1024 * 1024  # the backend's cap: one log
    finally:
        for exporter in exporters:
            exporter.shutdown()


def test_grpc_without_the_extra_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_grpc(name: str, *args: object, **kwargs: object) -> object:
        if name == "grpc" or name.startswith(("grpc.", "opentelemetry.exporter.otlp.proto.grpc")):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_grpc)
    with pytest.raises(ExportError, match=r"agent-collector\[grpc\]"):
        build_otlp_exporters(
            {"endpoint": "http://127.0.0.1:4317", "protocol": "grpc"}, {}, make_paths(tmp_path)
        )
