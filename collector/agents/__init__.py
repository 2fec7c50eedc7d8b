"""Agent parsers: one module per agent, each a pure function ``parse(record) -> list[AgentActivityEntry]``.

The module name comes from the agent definition's ``parser`` field.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from collector.model import AgentActivityEntry, RawRecord

Parser = Callable[[RawRecord], list[AgentActivityEntry]]


def load_parser(module: str) -> Parser:
    mod = importlib.import_module(f"collector.agents.{module}")
    parse: Parser = mod.parse
    return parse
