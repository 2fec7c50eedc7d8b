"""How a start makes the pipeline from the configuration, the agent definitions and the checkpoint
store, and the settings of an agent that joins later (an external plugin's, ``Service`` after the
deferred discovery)."""

from __future__ import annotations

import getpass
import logging
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from collector.agents.registry import load_parser
from collector.config import Config, ConfigError, agent_setting
from collector.daemon.followed_paths import hook_path_fields
from collector.daemon.session_state import SessionState
from collector.definitions import AgentDefinition
from collector.paths import Paths
from collector.pipeline.attributes import EntryStamper, GlobalAttributes, attribute_file
from collector.pipeline.content_policy import (
    KEY_FILE,
    ContentKeyError,
    ContentPolicy,
    load_or_create_key,
    policy_for,
)
from collector.pipeline.correlation_files import CorrelationFiles
from collector.pipeline.crash_guard import CrashGuard
from collector.pipeline.field_types import FieldTypes
from collector.pipeline.git_attributes import GitAttributes
from collector.pipeline.masking import Masker, MaskingRuleError, load_rules
from collector.pipeline.processor import AgentSettings, Pipeline
from collector.pipeline.quarantine import Quarantine, quarantine_dir
from collector.pipeline.status import SessionStatusTracker
from collector.pipeline.turn_links import TurnLinks

log = logging.getLogger("collector")  # the daemon's lines, as the Service's


@dataclass(frozen=True, slots=True)
class Assembled:
    pipeline: Pipeline
    status: SessionStatusTracker  # also the pipeline's; the live view and the idle rule read it
    guard: CrashGuard  # also the delivery's: it names the batch an exporter takes


@dataclass(slots=True)
class PipelineAssembly:
    """Owns the recipe: each agent's settings (its parser, whether content is captured, the hook fields
    that name transcript files, the declared field types), the resource (user and host), the stamps (git, custom
    attributes; ``env``: the daemon's environment for OTEL_*_ATTRIBUTES), the content
    policy and the masking, the crash guard and the quarantine; the session-keeping parts come from
    ``sessions`` (their state is in the checkpoint store). ``record_faults``: a fatal signal is reported
    to <state dir>/fault.log (the commands, not in-process tests)."""

    config: Config
    paths: Paths
    sessions: SessionState
    record_faults: bool = False
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)  # OTEL_*_ATTRIBUTES are the daemon's

    def agent_settings(self, agent_id: str, defn: AgentDefinition) -> AgentSettings | None:
        """None (logged): its parser cannot be loaded, and the agent is skipped."""
        try:
            parser = load_parser(defn.parser)
        except LookupError as exc:
            log.error("%s: %s; agent skipped", agent_id, exc)
            return None
        capture = agent_setting(self.config, agent_id, "content_capture",
                                defn.content_capture or bool(self.config.content.capture))
        types = FieldTypes.of_sources(defn.sources)
        return AgentSettings(parser, bool(capture), defn.provider, hook_path_fields(defn),
                             types if types.by_kind else None)

    def build(self, definitions: dict[str, AgentDefinition], idle_ns: Callable[[str], int | None]) -> Assembled:
        """The pipeline for ``definitions``; an agent whose settings cannot be made leaves ``definitions``.
        ConfigError: the content key or a masking rule is unusable."""
        agents = {}
        for agent_id, defn in list(definitions.items()):
            settings = self.agent_settings(agent_id, defn)
            if settings is None:
                del definitions[agent_id]
            else:
                agents[agent_id] = settings
        col = self.config.collector
        resource = {"user.id": col.user_id or _login(), "host.name": col.host_name or socket.gethostname()}
        cap = col.sessions_in_memory
        correlator = self.sessions.make_correlator(cap)
        try:
            content = policy_for(self.paths.state_dir, self.config.content.digest)
        except ContentKeyError as exc:
            raise ConfigError(str(exc)) from exc
        status = self.sessions.make_status({k: d.status_rules for k, d in definitions.items()}, cap,
                                           content.digest_value, idle_ns)
        masker = self._masker(content)
        guard = CrashGuard(self.paths.state_dir, faults=self.record_faults)
        store = self.sessions.store
        pipeline = Pipeline(agents, resource, store.seen, correlator, self.config.masking.enabled, status, content,
                            Quarantine(quarantine_dir(self.paths), masker.mask_value), self.sessions.make_turns(cap),
                            masker=masker, guard=guard,
                            stampers=self._stampers(),
                            invocations=self.sessions.make_invocations(cap, col.upstream_trace_link),
                            drop_agent_fields=not col.export_agent_fields, turn_links=self._turn_links(cap))
        return Assembled(pipeline, status, guard)

    def _turn_links(self, cap: int) -> TurnLinks | None:
        """LoongSuite Pilot's correlation files, read when upstream trace linking is on and a folder is named."""
        col = self.config.collector
        if not (col.upstream_trace_link and col.correlation_dir):
            return None
        return self.sessions.make_turn_links(cap, CorrelationFiles(self.paths.expand(col.correlation_dir)))

    def _stampers(self) -> list[EntryStamper]:
        """Git attributes (the agent's own facts), then the global custom attributes."""
        git: list[EntryStamper] = [GitAttributes()] if self.config.collector.git_attributes else []
        return [*git, GlobalAttributes(self.config.attributes, self.env, attribute_file(self.paths.config_dir))]

    def _masker(self, content: ContentPolicy) -> Masker:
        """The shipped rules and the config's, with the modes per field class (hash: keyed like content)."""
        cfg = self.config.masking
        modes = {"content": cfg.content_mode, "attributes": cfg.attributes_mode}
        try:
            key = content.key
            if key is None and "hash" in modes.values():
                key = load_or_create_key(self.paths.state_dir / KEY_FILE)
            return Masker(load_rules(cfg.rules, cfg.disabled_rules), modes, key)
        except (MaskingRuleError, ContentKeyError) as exc:
            raise ConfigError(str(exc)) from exc


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
