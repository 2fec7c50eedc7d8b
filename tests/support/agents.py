"""Shared by the per-agent parser tests: a fixture's lines as RawRecords, and the real pipeline over them
(content kept, masking off, nothing stored), so tests can feed the sources in any order."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from collector.agents import Parser
from collector.model import RawRecord
from collector.pipeline.correlate import Correlator
from collector.pipeline.processor import AgentSettings, Pipeline

FIXTURES = Path(__file__).parent.parent / "fixtures"


def fixture_records(agent: str, case: str, kind: str) -> list[RawRecord]:
    """The spool lines (kind "hook") or the agent's own JSONL lines (any other kind) of a fixture case."""
    folder = FIXTURES / agent / case / ("spool" if kind == "hook" else "home")
    out = []
    for path in sorted(folder.rglob("*.jsonl")):
        offset = 0
        for line in path.read_bytes().splitlines(keepends=True):
            if line.strip():
                out.append(RawRecord(agent, kind, json.loads(line), "fp", str(offset), 1, {"path": str(path)}))
            offset += len(line)
    return out


def run_pipeline(agent: str, parse: Parser, batches: Iterable[list[RawRecord]]) -> list[dict[str, Any]]:
    pipeline = Pipeline({agent: AgentSettings(parse, capture=True)}, {"user.id": "u"}, lambda ids: set(),
                        Correlator(), masking=False)
    return [e for batch in batches for e in pipeline.process(batch).entries]


def by_name(entries: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in entries if e["event.name"] == name]
