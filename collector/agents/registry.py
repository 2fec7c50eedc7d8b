"""The parsers, by the name an agent definition's ``parser`` field gives: the modules of this package,
and those an installed package declares under the entry point group ``agent_collector.parsers`` (a
:class:`~collector.registry.Plugin` whose build function returns the parser). Parsers take no
configuration."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from collector.agents import (
    Parser,
    canonical,
    claude_code,
    cline,
    codex,
    copilot,
    entire_plugin,
    gemini_cli,
    opencode,
    pi,
    qwen_code,
)
from collector.registry import Plugin, Registry

ParserBuilder = Callable[[dict[str, Any]], Parser]

_MODULES = (canonical, claude_code, cline, codex, copilot, entire_plugin, gemini_cli, opencode, pi, qwen_code)


def _returns(parse: Parser) -> ParserBuilder:
    return lambda config: parse


@cache
def parsers() -> Registry[ParserBuilder]:
    builtin = [Plugin(m.__name__.rpartition(".")[2], _returns(m.parse)) for m in _MODULES]
    return Registry("parser", builtin, group="agent_collector.parsers")


def load_parser(name: str) -> Parser:
    """The parser ``name``; raises LookupError when none is registered under it."""
    parser: Parser = parsers().build(name, {})
    return parser
