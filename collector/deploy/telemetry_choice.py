"""The user's opt-in to an agent's own telemetry (``install --telemetry``), kept in
``<state dir>/telemetry.json``: per agent, since when, and the values of the user's own that our settings
replaced (their endpoint and headers: put back by ``uninstall``, and the backend ``forward`` names, where
the agent's telemetry is still sent). While an agent is in this file its definition's ``telemetry``
integration is one of its integrations: ``install`` keeps it, the watchdog repairs it; ``install
--no-telemetry`` or ``uninstall`` takes the agent out."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from collector.definitions.loader import AgentDefinition
from collector.deploy.fsutil import read_or_none, write_atomic
from collector.deploy.jsonc import JsoncError
from collector.deploy.jsonc import parse as parse_jsonc
from collector.deploy.telemetry_settings import KIND, dotted_get, endpoint, resolved
from collector.paths import Paths
from collector.util.private import private_dir

FILE = "telemetry.json"
log = logging.getLogger(__name__)


def choice_file(paths: Paths) -> Path:
    return paths.state_dir / FILE


def load(paths: Paths) -> dict[str, dict[str, Any]]:
    raw = read_or_none(choice_file(paths))
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, dict)}


def _write(paths: Paths, data: dict[str, Any]) -> None:
    private_dir(choice_file(paths).parent)
    write_atomic(choice_file(paths), json.dumps(data, indent=2, sort_keys=True).encode() + b"\n", mode=0o600)


def spec_of(defn: AgentDefinition) -> dict[str, Any] | None:
    spec = defn.raw.get("telemetry")
    return {"kind": KIND, **spec} if isinstance(spec, dict) else None


def integrations_for(defn: AgentDefinition, paths: Paths) -> list[dict[str, Any]]:
    """The definition's integrations, with its telemetry one when the user opted in for this agent."""
    spec = spec_of(defn)
    if spec is None or defn.id not in load(paths):
        return defn.integrations
    return [*defn.integrations, spec]


def saved_values(paths: Paths, agent: str) -> dict[str, Any]:
    saved = load(paths).get(agent, {}).get("saved")
    return saved if isinstance(saved, dict) else {}


def opt_in(paths: Paths, defn: AgentDefinition) -> dict[str, Any]:
    """Record the choice and what of the user's our settings replace; returns the agent's record."""
    spec = spec_of(defn)
    if spec is None:
        raise ValueError(f"{defn.id}: no telemetry settings are known for this agent")
    data = load(paths)
    record = data.get(defn.id) or {"since_unix": time.time()}
    ours = resolved(spec, endpoint(paths))
    current = _current(paths.expand(spec["file"]), spec.get("format", "json"))
    pointed_here = any(dotted_get(current, k) == v for k, v in ours.items() if isinstance(v, str) and "127.0.0.1" in v)
    saved = dict(record.get("saved") or {}) if pointed_here else {}
    forward_keys = [v for k, v in dict(spec.get("forward", {})).items() if k != "default_protocol"]
    for key in [*ours, *forward_keys]:
        value = dotted_get(current, key)
        if value is not None and not pointed_here:
            saved[key] = value  # the user's own, even when equal to ours; once ours are there, kept as saved
    record["saved"] = saved
    record["forward"] = _forward(spec, saved)
    data[defn.id] = record
    _write(paths, data)
    return record


def _forward(spec: dict[str, Any], saved: dict[str, Any]) -> dict[str, Any] | None:
    """The user's backend, when they were sending to one over OTLP/HTTP: their telemetry switched on (the
    ``enabled`` key truthy, when named), an http(s) endpoint, a protocol that is not gRPC (the pass-through
    speaks OTLP/HTTP; ``default_protocol`` is the agent's own default when the key is unset)."""
    names = dict(spec.get("forward", {}))
    url = saved.get(names.get("endpoint", ""))
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    if "enabled" in names and str(saved.get(names["enabled"])).lower() not in ("1", "true"):
        return None
    protocol = saved.get(names.get("protocol", ""), names.get("default_protocol", "http"))
    if "grpc" in str(protocol).lower():
        log.warning("%s: your telemetry endpoint %s speaks gRPC; it is not forwarded to (OTLP/HTTP only)",
                    spec.get("file"), url)
        return None
    headers = saved.get(names.get("headers", ""))
    return {"endpoint": url.rstrip("/"), "headers": _headers(headers)}


def _headers(value: Any) -> dict[str, str]:
    """``OTEL_EXPORTER_OTLP_HEADERS`` form (``k=v,k2=v2``) or an object."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if not isinstance(value, str):
        return {}
    pairs = (part.split("=", 1) for part in value.split(",") if "=" in part)
    return {k.strip(): v.strip() for k, v in pairs if k.strip()}


def _current(path: Path, fmt: str) -> dict[str, Any]:
    raw = read_or_none(path)
    if not raw:
        return {}
    try:
        if fmt == "toml":
            import tomllib

            data: Any = tomllib.loads(raw.decode("utf-8"))
        else:
            data = parse_jsonc(raw.decode("utf-8"), comments=True).value()
    except (ValueError, UnicodeDecodeError, JsoncError, RecursionError):
        return {}  # the edit itself refuses the file and says why
    return data if isinstance(data, dict) else {}


def opt_out(paths: Paths, agent: str) -> bool:
    data = load(paths)
    if agent not in data:
        return False
    del data[agent]
    _write(paths, data)
    return True


def forward_targets(paths: Paths) -> dict[str, dict[str, Any]]:
    """Per agent, the user's own backend its telemetry is forwarded to (``endpoint``, ``headers``)."""
    return {agent: r["forward"] for agent, r in load(paths).items() if isinstance(r.get("forward"), dict)}
