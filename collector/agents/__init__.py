"""Agent parsers: one module per agent, each a pure function ``parse(record) -> list[AgentActivityEntry]``.

The definition's ``parser`` field names one; :mod:`collector.agents.registry` holds them.
"""

from __future__ import annotations

from collector.agents.common import Parser as Parser  # the pipeline's word for an agent's ``parse``
