"""The parsers, by the name an agent definition's ``parser`` field gives: the modules of this package,
and those an installed package declares under the entry point group ``agent_collector.parsers`` (a
:class:`~collector.registry.Plugin` whose build function returns the parser). Parsers take no
configuration."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import cache
from typing import Any

import collector.agents.canonical as canonical
import collector.agents.claude_code as claude_code
import collector.agents.cline as cline
import collector.agents.codex as codex
import collector.agents.copilot as copilot
import collector.agents.entire_plugin as entire_plugin
import collector.agents.gemini_cli as gemini_cli
import collector.agents.hermes as hermes
import collector.agents.kimi as kimi
import collector.agents.mistral_vibe as mistral_vibe
import collector.agents.opencode as opencode
import collector.agents.pi as pi
import collector.agents.qwen_code as qwen_code
from collector.agents.common import Parser, unreadable
from collector.model import AgentActivityEntry, RawRecord
from collector.registry import Plugin, Registry

ParserBuilder = Callable[[dict[str, Any]], Parser]
OTEL_KINDS = frozenset({"otel_log", "otel_span", "otel_metric"})  # collector.sources.otlp_records.KINDS

_MODULES = (canonical, claude_code, cline, codex, copilot, entire_plugin, gemini_cli, hermes, kimi, mistral_vibe,
            opencode, pi, qwen_code)


def _returns(parse: Parser) -> ParserBuilder:
    return lambda config: parse


@cache
def parsers() -> Registry[ParserBuilder]:
    builtin = [Plugin(m.__name__.rpartition(".")[2], _returns(m.parse)) for m in _MODULES]
    return Registry("parser", builtin, group="agent_collector.parsers")


def load_parser(name: str) -> Parser:
    """The parser ``name``; raises LookupError when none is registered under it. OpenTelemetry records
    (``otel_log``, ``otel_span``, ``otel_metric``: the OTLP receiver's and the OTel file sources') reach it
    only for the kinds its module names in ``OTEL_KINDS``; the others are counted per agent as
    unreadable ("<kind> records are not parsed yet", shown by ``status``) and make nothing."""
    parser: Parser = parsers().build(name, {})
    module = sys.modules.get(getattr(parser, "__module__", "") or "")
    handled = frozenset(getattr(module, "OTEL_KINDS", ()))
    return parser if handled >= OTEL_KINDS else _otel_guard(parser, handled)


def _otel_guard(parser: Parser, handled: frozenset[str]) -> Parser:
    def parse(record: RawRecord) -> list[AgentActivityEntry]:
        if record.kind in OTEL_KINDS and record.kind not in handled:
            return [unreadable(record, f"{record.kind} records are not parsed yet")]
        return parser(record)
    return parse
