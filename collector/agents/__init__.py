"""Agent parsers: one module per agent, each a pure function ``parse(record) -> list[AgentActivityEntry]``.

The definition's ``parser`` field names one; :mod:`collector.agents.registry` holds them.
"""

from __future__ import annotations

from collections.abc import Callable

from collector.model import AgentActivityEntry, RawRecord

Parser = Callable[[RawRecord], list[AgentActivityEntry]]
