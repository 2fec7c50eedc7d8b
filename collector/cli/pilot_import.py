"""What ``import loongsuite`` would do, read from a LoongSuite Pilot home (nothing written here).

Pilot's home (``~/.loongsuite-pilot``, github.com/alibaba/loongsuite-pilot ``docs/configuration.md``)
holds ``config.json``, ``agents.d.local/*.json`` (the user's definitions), ``span-attributes.json`` (the
live attributes ``loongsuite-pilot span-attr set`` manages) and, per version, the built-in ``agents.d``.
Each definition is converted by ``collector.definitions.pilot_convert``; the config's content capture,
OTLP trace backend, user id and global span attributes become ours. Every file is read at a bounded size
and checked: a broken one is a line saying so, never a crash.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from collector.config import schema as config_schema
from collector.definitions.loader import deep_merge
from collector.definitions.pilot_convert import Conversion, convert, deploy_files, is_pilot_definition, our_id
from collector.exporters.otlp_config import OtlpConfigError, parse_headers
from collector.paths import Paths
from collector.pipeline.attributes import checked
from collector.util.regular import read_regular

MAX_FILE = 1 << 20
MAX_DEFINITIONS = 256


@dataclass(slots=True)
class Plan:
    conversions: list[tuple[Path, Conversion]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)  # sections of our config.toml to set
    live_attributes: dict[str, str] = field(default_factory=dict)  # for <config dir>/attributes.json
    pilot_files: dict[str, list[str]] = field(default_factory=dict)  # our id -> the files Pilot edits for it
    lines: list[str] = field(default_factory=list)  # what was carried, what was not, and why


def read_json(path: Path) -> tuple[Any, str | None]:
    """(the JSON value, None) or (None, why not); a missing file is (None, None)."""
    if not path.exists():
        return None, None
    data = read_regular(str(path), MAX_FILE + 1)
    if data is None:
        return None, f"{path}: not a readable regular file"
    if len(data) > MAX_FILE:
        return None, f"{path}: larger than {MAX_FILE} bytes"
    try:
        return orjson.loads(data), None
    except orjson.JSONDecodeError as exc:
        return None, f"{path}: not JSON ({exc})"


def pilot_data_template(pilot_home: Path, paths: Paths) -> str:
    """``$PILOT_DATA`` as our path template: ``~/...`` when it lies in the home, else the absolute path."""
    home = paths.home.resolve()
    resolved = pilot_home.resolve()
    if resolved.is_relative_to(home):
        return "~/" + str(resolved.relative_to(home)) if resolved != home else "~"
    return str(resolved)


def definition_files(pilot_home: Path) -> dict[str, list[Path]]:
    """Per file name: the installed versions' built-in definition (the newest version directory sorts last),
    then the user's local one (``agents.d.local``), which is merged over it."""
    found: dict[str, list[Path]] = {}
    versions = pilot_home / "versions"
    for path in sorted(versions.glob("*/agents.d/*.json")) if versions.is_dir() else []:
        found[path.name] = [path]
    local = pilot_home / "agents.d.local"
    for path in sorted(local.glob("*.json")) if local.is_dir() else []:
        found[path.name] = found.get(path.name, [])[:1] + [path]
    return dict(sorted(found.items())[:MAX_DEFINITIONS])


def _definition(files: list[Path], plan: Plan) -> dict[str, Any] | None:
    merged: dict[str, Any] = {}
    for path in files:
        data, problem = read_json(path)
        if problem or not isinstance(data, dict) or not is_pilot_definition(data):
            plan.lines.append(f"skipped {path}: {problem or 'not a LoongSuite Pilot definition'}")
            continue
        merged = deep_merge(merged, data)
    return merged or None


def pilot_data_dir(pilot_home: Path, config: Any) -> Path:
    """``$PILOT_DATA``: the config's ``dataDir`` when it names one, else the home itself."""
    named = config.get("dataDir") if isinstance(config, dict) else None
    return Path(named).expanduser() if isinstance(named, str) and named.startswith(("/", "~/")) else pilot_home


def plan_import(pilot_home: Path, paths: Paths, ours: Collection[str]) -> Plan:
    plan = Plan()
    config, problem = read_json(pilot_home / "config.json")
    template = pilot_data_template(pilot_data_dir(pilot_home, config), paths)
    for files in definition_files(pilot_home).values():
        data = _definition(files, plan)
        if data is None:
            continue
        conversion = convert(data, ours, template)
        plan.conversions.append((files[-1], conversion))
        if conversion.ours:
            plan.pilot_files.setdefault(conversion.ours, []).extend(deploy_files(data))
    imported = {c.ours or c.pilot_id for _, c in plan.conversions if c.converted}
    if problem or (config is not None and not isinstance(config, dict)):
        plan.lines.append(f"config: {problem or 'config.json is not a JSON object'}; nothing carried")
    elif isinstance(config, dict):
        _settings(config, imported, plan)
    _agent_control(pilot_home, imported, plan)
    _live_attributes(pilot_home, plan)
    return plan


def _agent_control(pilot_home: Path, imported: set[str], plan: Plan) -> None:
    """``agent-control.json`` (``{"version": 3, "tools": {"<id>": "on|off|auto"}}``, Pilot's docs/agents.md):
    an agent switched off there is off here too."""
    data, problem = read_json(pilot_home / "agent-control.json")
    tools = data.get("tools") if isinstance(data, dict) else None
    if problem or (data is not None and not isinstance(tools, Mapping)):
        plan.lines.append(f"config: agent-control.json: {problem or 'no tools object'}; not carried")
        return
    for pilot_id, state in sorted((tools or {}).items()):
        mine = our_id(str(pilot_id))
        if state == "off" and mine in imported:
            plan.config.setdefault("agents", {}).setdefault(mine, {})["enabled"] = False
            plan.lines.append(f"config: agent-control.json {pilot_id} off -> agents.{mine}.enabled = false")


def _settings(config: Mapping[str, Any], imported: set[str], plan: Plan) -> None:
    user = config.get("userId", config.get("user.id"))
    if isinstance(user, str) and 0 < len(user) <= 256 and user.isprintable():
        plan.config.setdefault("collector", {})["user_id"] = user
        plan.lines.append(f"config: userId -> collector.user_id = {user!r}")
    _agents(config.get("agents"), imported, plan)
    _otlp(config, plan)
    attributes = config.get("globalSpanAttributes")
    if isinstance(attributes, Mapping) and attributes:
        kept = _attributes(attributes, "globalSpanAttributes", plan)
        if kept and "attributes" in config_schema().get("properties", {}):
            plan.config["attributes"] = kept
            plan.lines.append(f"config: globalSpanAttributes -> [attributes] ({', '.join(sorted(kept))})")
        elif kept:  # a config without an [attributes] table: the live file holds them
            plan.live_attributes.update(kept)
            plan.lines.append(f"config: globalSpanAttributes -> attributes.json ({', '.join(sorted(kept))})")
    for key, why in (("sls", "no SLS exporter here"), ("http", "no HTTP-batch exporter here"),
                     ("cms", "add it as an [[otlp.backends]] entry with its x-arms-* headers"),
                     ("mask", "masking is on by default here (masking.enabled)"),
                     ("jsonl", "our JSONL goes to <data dir>/output"),
                     ("upstreamLink", "see collector.upstream_trace_link")):
        if config.get(key) not in (None, {}, []):
            plan.lines.append(f"config: {key}: not carried ({why})")


def _flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _agents(agents: Any, imported: set[str], plan: Plan) -> None:
    if not isinstance(agents, Mapping):
        plan.lines.append("config: content capture: Pilot's default is on (captureMessageContent unset); "
                          "ours stays off: set content.capture = true to keep capturing")
        return
    unset = []
    for pilot_id, section in sorted(agents.items()):
        if not isinstance(pilot_id, str) or not isinstance(section, Mapping):
            continue
        mine = our_id(pilot_id)
        capture, enabled = _flag(section.get("captureMessageContent")), _flag(section.get("enabled"))
        if mine not in imported:
            if capture is not None or enabled is not None:
                plan.lines.append(f"config: agents.{pilot_id[:64]}: not carried (the agent was not imported)")
            continue
        target = plan.config.setdefault("agents", {}).setdefault(mine, {})
        if capture is not None:
            target["content_capture"] = capture
            plan.lines.append(f"config: agents.{pilot_id}.captureMessageContent -> agents.{mine}.content_capture "
                              f"= {str(capture).lower()}")
        else:
            unset.append(mine)
        if enabled is False:
            target["enabled"] = False
            plan.lines.append(f"config: agents.{pilot_id}.enabled -> agents.{mine}.enabled = false")
        if not target:
            del plan.config["agents"][mine]
    if not plan.config.get("agents"):
        plan.config.pop("agents", None)
    if unset or not agents:
        plan.lines.append("config: content capture: Pilot's default is on where captureMessageContent is unset"
                          f"{' (' + ', '.join(unset) + ')' if unset else ''}; ours stays off: set "
                          "content.capture = true (or agents.<id>.content_capture) to keep capturing")


def _otlp(config: Mapping[str, Any], plan: Plan) -> None:
    otlp = config.get("otlpTrace")
    if not isinstance(otlp, Mapping):
        return
    backend: dict[str, Any] = {"name": "loongsuite-pilot", "signals": ["traces"]}
    full, base = otlp.get("traceEndpoint"), otlp.get("endpoint")
    if isinstance(full, str) and full.startswith(("http://", "https://")):
        backend["traces"] = {"endpoint": full}
    elif isinstance(base, str) and base.startswith(("http://", "https://")):
        backend["endpoint"] = base
    else:
        plan.lines.append("config: otlpTrace: no http(s) traceEndpoint or endpoint; not carried")
        return
    headers = otlp.get("headers")
    if isinstance(headers, str):  # the k=v,k2=v2 form of LOONGSUITE_PILOT_OTLP_HEADERS
        try:
            headers = parse_headers(headers)
        except OtlpConfigError as exc:
            plan.lines.append(f"config: otlpTrace.headers: {exc}; not carried")
            headers = None
    if isinstance(headers, Mapping):
        backend["headers"] = {str(k): str(v) for k, v in headers.items()
                              if isinstance(k, str) and isinstance(v, (str, int, float)) and k.isprintable()}
    resource: dict[str, Any] = {}
    if isinstance(otlp.get("resourceAttributes"), Mapping):
        resource.update({str(k): v for k, v in otlp["resourceAttributes"].items()
                         if isinstance(v, (str, int, float, bool))})
    name = otlp.get("serviceName", config.get("serviceName"))
    if isinstance(name, str) and name:
        resource["service.name"] = name
    if resource:
        backend["resource_attributes"] = resource
    where = backend.get("traces", {}).get("endpoint") or backend.get("endpoint")
    if _flag(config.get("collectTrace")) is False:  # Pilot keeps the backend but sends nothing
        backend["enabled"] = False
        plan.lines.append(f"config: otlpTrace -> [[otlp.backends]] loongsuite-pilot ({where}), enabled = false "
                          "as Pilot's collectTrace = false")
    else:
        plan.lines.append(f"config: otlpTrace -> [[otlp.backends]] loongsuite-pilot, traces to {where}")
    plan.config["otlp"] = {"enabled": True, "backends": [backend]}


def _attributes(pairs: Mapping[str, Any], where: str, plan: Plan) -> dict[str, str]:
    problems: dict[str, int] = {}
    as_text = {k: (str(v).lower() if isinstance(v, bool) else str(v)) if isinstance(v, (str, int, float, bool))
               else v for k, v in pairs.items()}
    kept = checked(as_text, where, problems)
    plan.lines += [f"config: {reason}; not carried" for reason in sorted(problems)]
    return kept


def _live_attributes(pilot_home: Path, plan: Plan) -> None:
    path = pilot_home / "span-attributes.json"
    data, problem = read_json(path)
    if problem or (data is not None and not isinstance(data, Mapping)):
        plan.lines.append(f"attributes: {problem or f'{path} is not a JSON object'}; not carried")
    elif isinstance(data, Mapping) and data:
        plan.live_attributes.update(_attributes(data, "span-attributes.json", plan))
        if plan.live_attributes:
            plan.lines.append(f"attributes: span-attributes.json -> attributes.json "
                              f"({', '.join(sorted(plan.live_attributes))})")
