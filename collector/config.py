"""Configuration: ``config.toml`` in the user config directory, then environment overrides.

One schema, ``schemas/config.schema.json``, says what exists: every key, its type, its range and its
default. The file and the ``AGENT_COLLECTOR_<SECTION>__<KEY>=value`` variables (e.g.
``AGENT_COLLECTOR_CONTENT__CAPTURE=true``, ``AGENT_COLLECTOR_INGEST__PORT=4399``) are merged, checked
against it, and turned into a typed :class:`Config`. Booleans accept true/false, 1/0, yes/no, on/off and
nothing else; an unknown key is an error naming the nearest valid one; an agent id must be a known agent.
Any problem raises :class:`ConfigError` with one line naming the file or variable and the key.
The standard ``OTEL_EXPORTER_OTLP_*`` variables are read by the OTLP exporters themselves.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import errno
import os
import stat
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collector.paths import Paths, bundled_schema

MAX_CONFIG_BYTES = 1 << 20  # a config.toml larger than this is refused (it is a few kB)

if TYPE_CHECKING:
    import jsonschema

    from collector.definitions.verdicts import Verdicts

ENV_PREFIX = "AGENT_COLLECTOR_"
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


class ConfigError(Exception):
    pass


# -- the typed configuration (field names are the schema's keys; a test keeps them in step) ----------


@dataclass(slots=True)
class CollectorSection:
    user_id: str
    host_name: str
    poll_interval_s: float
    rescan_s: float
    batch_size: int
    max_line_bytes: int
    seen_retention_days: int
    sessions_in_memory: int
    once_stall_s: float  # collect --once: how long delivery may make no progress before it stops waiting
    stop_timeout_s: float = 2.5  # on a stop: how long the exporters may take to send what is queued
    git_attributes: bool = True  # vcs.* and git.worktree.* of the entry's working tree (pipeline.git_attributes)
    upstream_trace_link: bool = False  # a session started with TRACEPARENT: its turns under that span
    correlation_dir: str = "~/.loongsuite-pilot/acp-correlate"  # LoongSuite Pilot's per-turn upstream spans
    export_agent_fields: bool = False  # keep an agent's own agent.<id>.* fields in the entries (else dropped)


@dataclass(slots=True)
class ContentSection:
    capture: bool
    digest: str


@dataclass(slots=True)
class MaskingSection:
    enabled: bool
    content_mode: str
    attributes_mode: str
    disabled_rules: list[str]
    rules: list[dict[str, Any]]


@dataclass(slots=True)
class AgentSection:
    """``agents.<id>``: unset keys are None (the agent definition decides)."""

    enabled: bool | None = None
    content_capture: bool | None = None
    idle_timeout_s: float | None = None


@dataclass(slots=True)
class JsonlSection:
    enabled: bool
    dir: str
    field_names: str = "ours"  # "pilot": LoongSuite Pilot's names where they differ (model.pilot_names)


@dataclass(slots=True)
class IngestSection:
    enabled: bool
    port: int
    max_body_bytes: int
    otlp_max_bytes: int


@dataclass(slots=True)
class WatchdogSection:
    enabled: bool
    cooldown_s: float
    daily_cap: int


@dataclass(slots=True)
class DeploySection:
    """Auto-deploy of agents installed after agent-collector (collector/deploy/autodeploy.py)."""

    auto: bool = True
    rescan_s: float = 120.0


@dataclass(slots=True)
class ExternalAgentsSection:
    """Entire external agent plugins as sources (collector.external, docs/external-agents.md)."""

    enabled: bool = False
    repos: list[str] = field(default_factory=list)
    plugins: list[str] = field(default_factory=list)  # names to use; empty: all that discovery accepts
    interval_s: float = 60.0
    timeout_s: float = 30.0
    max_output_bytes: int = 10 * 1024 * 1024


@dataclass(slots=True)
class StoreSection:
    """The usage store ``report`` and the dashboard read (docs/reports.md)."""

    enabled: bool
    path: str
    retention_days: int


@dataclass(slots=True)
class RetentionSection:
    spool_grace_s: float
    output_days: int
    output_max_mb: int
    quarantine_days: int
    log_days: int
    log_max_mb: int


@dataclass(slots=True)
class Config:
    collector: CollectorSection
    content: ContentSection
    masking: MaskingSection
    jsonl: JsonlSection
    store: StoreSection
    ingest: IngestSection
    watchdog: WatchdogSection
    retention: RetentionSection
    agents: dict[str, AgentSection] = field(default_factory=dict)
    otlp: dict[str, Any] = field(default_factory=dict)  # checked here, interpreted by exporters/otlp_config
    external_agents: ExternalAgentsSection = field(default_factory=ExternalAgentsSection)
    deploy: DeploySection = field(default_factory=DeploySection)
    prices: dict[str, dict[str, float]] = field(default_factory=dict)  # model -> USD per million (usage.config_prices)
    attributes: dict[str, str] = field(default_factory=dict)  # custom attributes on every entry (pipeline.attributes)
    budget: dict[str, Any] = field(default_factory=dict)  # spend limits (usage.budget, daemon.budget_watch)

    def agent(self, agent_id: str) -> AgentSection:
        return self.agents.get(agent_id) or AgentSection()

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


SECTIONS: dict[str, type] = {
    "collector": CollectorSection, "content": ContentSection, "masking": MaskingSection,
    "jsonl": JsonlSection, "store": StoreSection, "ingest": IngestSection, "watchdog": WatchdogSection,
    "retention": RetentionSection,
    "external_agents": ExternalAgentsSection, "deploy": DeploySection,
}


def agent_setting(config: Config, agent: str, key: str, default: Any) -> Any:
    """``agents.<id>.<key>`` if set, else ``default``."""
    value = getattr(config.agent(agent), key)
    return default if value is None else value


# -- the schema ------------------------------------------------------------------------------------


def schema() -> dict[str, Any]:
    return bundled_schema("config")


def _resolve(node: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return node
    target: Any = schema()
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    return _resolve({**target, **{k: v for k, v in node.items() if k != "$ref"}})


def _child(node: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    node = _resolve(node)
    props = node.get("properties", {})
    if key in props:
        return _resolve(props[key])
    extra = node.get("additionalProperties")
    return _resolve(extra) if isinstance(extra, Mapping) else None


def _is_flag(node: Mapping[str, Any]) -> bool:
    return _resolve(node).get("title") == "flag"


def _to_bool(value: Any) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() in _TRUE


# -- reading ---------------------------------------------------------------------------------------


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _scalar(text: str, node: Mapping[str, Any] | None) -> Any:
    """An environment value as the schema wants it: text for strings and flags, else a TOML scalar."""
    if node is None or _is_flag(node) or node.get("type") == "string":
        return text
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _agent_key(part: str, known: Iterable[str]) -> str:
    """Environment names spell agent ids with underscores (``CLAUDE_CODE``)."""
    dashed = part.replace("_", "-")
    return dashed if dashed in set(known) else part


def _env_overrides(env: Mapping[str, str], known_agents: Iterable[str]) -> tuple[dict[str, Any], dict[tuple, str]]:
    out: dict[str, Any] = {}
    origins: dict[tuple, str] = {}
    for name, value in sorted(env.items()):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX):].split("__")]
        if path[0] == "agents" and len(path) > 1:
            path[1] = _agent_key(path[1], known_agents)
        node: Mapping[str, Any] | None = schema()
        target = out
        for part in path[:-1]:
            node = _child(node, part) if node is not None else None
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise ConfigError(f"{name}: {'.'.join(path)} is set twice with different shapes")
        leaf = _child(node, path[-1]) if node is not None else None
        target[path[-1]] = _scalar(value, leaf)
        origins[tuple(path)] = name
    return out, origins


def _read_regular(path: Path) -> bytes:
    """The file's bytes; a FIFO, a directory or a device there is an error, never a hang."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, a directory or a device)")
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
        if len(data) > MAX_CONFIG_BYTES:
            raise OSError(errno.EFBIG, f"larger than {MAX_CONFIG_BYTES} bytes")
        return data
    finally:
        os.close(fd)


def _read_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        return tomllib.loads(_read_regular(path).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc


# -- checking --------------------------------------------------------------------------------------


def _nearest(word: str, choices: Iterable[str]) -> str:
    match = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.5)
    return f" (did you mean {match[0]!r}?)" if match else f" (valid: {', '.join(sorted(choices))})"


def _describe(error: jsonschema.ValidationError) -> tuple[list[Any], str]:
    """The key path and a one-line reason for one schema error."""
    where = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        allowed = set(error.schema.get("properties", {}))
        unknown = sorted(k for k in error.instance if k not in allowed)[0]
        return where + [unknown], "unknown key" + _nearest(unknown, allowed)
    if _is_flag(error.schema):
        return where, f"must be true or false (or 1/0, yes/no, on/off), not {error.instance!r}"
    if error.validator in ("minimum", "maximum"):
        lo, hi = error.schema.get("minimum"), error.schema.get("maximum")
        span = f"between {lo} and {hi}" if lo is not None and hi is not None else error.message
        return where, f"must be {span}, not {error.instance!r}"
    if error.validator == "required" and isinstance(error.instance, Mapping):
        missing = sorted(k for k in error.validator_value if k not in error.instance)
        return where, f"needs {', '.join(missing)} (USD per million tokens)" if where[:1] == ["prices"] \
            else f"needs {', '.join(missing)}"
    if error.validator == "type":
        kind = error.validator_value
        return where, f"must be {'an' if str(kind)[:1] in 'aeiou' else 'a'} {kind}, not {error.instance!r}"
    if error.validator in ("oneOf", "not") and isinstance(error.schema.get("x-message"), str):
        return where, error.schema["x-message"]  # the schema's own words for a rule that spans keys
    return where, error.message


def _origin(where: list[Any], origins: Mapping[tuple, str], file: Path) -> str:
    for n in range(len(where), 0, -1):
        if tuple(where[:n]) in origins:
            return origins[tuple(where[:n])]
    below = [name for path, name in origins.items() if where and list(path[:len(where)]) == where]
    return below[0] if below else str(file)


def _check(data: dict[str, Any], origins: Mapping[tuple, str], file: Path, known_agents: Iterable[str]) -> None:
    problems = _schema_problems(data) if data else []  # no file, no overrides: the defaults (a test checks {})
    known = set(known_agents)
    for agent in sorted(data.get("agents", {}) if isinstance(data.get("agents"), dict) else {}):
        if known and agent not in known:
            problems.append((["agents", agent], "unknown agent" + _nearest(agent, known)))
    if problems:
        where, reason = problems[0]
        key = ".".join(str(p) for p in where) or "(top level)"
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ConfigError(f"{_origin(where, origins, file)}: {key}: {reason}{more}")


def _schema_problems(data: dict[str, Any]) -> list[tuple[list[Any], str]]:
    import jsonschema  # here, not at start-up: a sixth of a cold start, for a config that has something to check

    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    return [_describe(e) for e in errors]


# -- building the typed object ---------------------------------------------------------------------


def _normalized(value: Any, node: Mapping[str, Any] | None) -> Any:
    """Flags become bools and missing keys take their defaults, walking the schema."""
    if node is None:
        return value
    node = _resolve(node)
    if _is_flag(node):
        return _to_bool(value)
    if isinstance(value, dict):
        out = {k: _normalized(v, _child(node, k)) for k, v in value.items()}
        for key, sub in node.get("properties", {}).items():
            sub = _resolve(sub)
            if key not in out and "default" in sub:
                out[key] = _normalized(copy.deepcopy(sub["default"]), sub)
        return out
    if isinstance(value, list):
        items = node.get("items")
        return [_normalized(v, items if isinstance(items, Mapping) else None) for v in value]
    if node.get("type") == "number" and isinstance(value, int):
        return float(value)
    if node.get("type") == "integer" and isinstance(value, float):
        return int(value)
    return value


def _build(data: dict[str, Any]) -> Config:
    names = [*SECTIONS, "agents", "otlp", "prices", "attributes", "budget"]
    full = _normalized({name: data.get(name, {}) for name in names}, schema())
    sections = {name: cls(**full[name]) for name, cls in SECTIONS.items()}
    agents = {k: AgentSection(**v) for k, v in full["agents"].items()}
    return Config(**sections, agents=agents, otlp=full["otlp"], prices=full["prices"], attributes=full["attributes"],
                  budget=full["budget"])


def _known_agents(config_file: Path) -> list[str]:
    from collector.definitions import load_definitions

    return list(load_definitions(config_file.parent / "agents.d").agents)


def load_config(path: Path, env: Mapping[str, str] | None = None,
                known_agents: Iterable[str] | None = None) -> Config:
    """The checked configuration. ``known_agents`` defaults to the agent definitions next to ``path``."""
    known = list(known_agents) if known_agents is not None else _known_agents(path)
    data = _read_file(path)
    overrides, origins = _env_overrides(os.environ if env is None else env, known)
    _merge(data, overrides)
    _check(data, origins, path, known)
    return _build(data)


def load_for(paths: Paths, env: Mapping[str, str] | None = None, check: Any = None,
             verdicts: Verdicts | None = None) -> Config:
    """What ``run``, ``install``, ``status`` and the service start use: the configuration, and the user's
    ``agents.d`` overrides must be valid too (a broken override is an error here, not a silent skip).
    ``check`` is the registries' check of a definition (``collector.daemon.plugins.check_definition``);
    ``verdicts`` the schema verdicts of earlier runs (``collector.definitions.verdicts``; default: the
    state folder's)."""
    from collector.definitions import load_definitions
    from collector.definitions.verdicts import FILE
    from collector.definitions.verdicts import Verdicts as _Verdicts

    verdicts = verdicts if verdicts is not None else _Verdicts(paths.state_dir / FILE)
    loaded = load_definitions(paths.agents_override_dir, check=check, verdicts=verdicts)
    verdicts.save()
    if loaded.problems:
        more = f" (and {len(loaded.problems) - 1} more)" if len(loaded.problems) > 1 else ""
        raise ConfigError(f"agent definition {loaded.problems[0]}{more}")
    return load_config(paths.config_file, env, known_agents=loaded.agents)


def defaults() -> Config:
    """Every setting at its default (no file, no environment)."""
    return _build({})


DEFAULT_FILE = """\
# agent-collector configuration. Every key is optional; these are the defaults.
# Environment overrides: AGENT_COLLECTOR_<SECTION>__<KEY>=value, e.g. AGENT_COLLECTOR_CONTENT__CAPTURE=true
# Booleans: true/false (also 1/0, yes/no, on/off). Unknown keys are an error. All keys: schemas/config.schema.json

[collector]
# user_id = "alice"          # default: login name
poll_interval_s = 2.0

[content]
# Keep prompts, completions, tool arguments and results? Off: only their length and a keyed digest
# (HMAC-SHA256 under <state dir>/content.key) are kept.
capture = false
digest = "hmac"              # "none": keep the length only

[masking]
enabled = true               # secrets are masked in everything that is kept
content_mode = "redact"      # in prompts, completions, tool arguments/results: redact | hash | drop | keep
attributes_mode = "redact"   # in every other string field
# disabled_rules = ["secret_in_prose"]   # ids in collector/data/masking-rules.toml
# [[masking.rules]]                      # more rules, same keys as the shipped ones
# id = "acme_token"
# keywords = ["acme_"]
# pattern = '\\bacme_[A-Za-z0-9]{32}\\b'

[jsonl]
enabled = true               # daily files under <data dir>/output

[store]
enabled = true               # usage store (<data dir>/usage.sqlite) for `report` and the dashboard
retention_days = 0           # drop rows older than this many days; 0 keeps everything

[ingest]
enabled = true               # loopback HTTP hook ingest
port = 0                     # 0: chosen per user at install, kept in <state dir>/ingest.port

# [agents.claude-code]
# content_capture = true     # per-agent override

# [external_agents]          # Entire entire-agent-* plugins on PATH as sources (docs/external-agents.md)
# enabled = true
# repos = ["~/src/my-project"]

# [otlp]
# enabled = true
# [[otlp.backends]]
# endpoint = "http://127.0.0.1:4318"

# [attributes]                 # custom attributes on every entry (also OTEL_RESOURCE_ATTRIBUTES,
# team = "platform"            # OTEL_SPAN_ATTRIBUTES and `agent-collector attributes set`)

# [prices."qwen3-coder-plus"]  # your own price for a model, USD per million tokens; wins over the tables
# input = 1.0
# output = 5.0
# cache_read = 0.1             # default: the input price
# cache_write = 1.25           # default: the input price
"""
