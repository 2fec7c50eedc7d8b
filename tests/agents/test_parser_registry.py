"""OpenTelemetry records reach a parser only when its module names their kinds (``OTEL_KINDS``); every
other parser, canonical included, has them counted as not parsed yet instead of guessing at them."""

from __future__ import annotations

import sys
import types

import pytest

from collector.agents import registry
from collector.agents.common import UNREADABLE
from collector.model.raw import RawRecord

OTEL_LOG = {"signal": "logs", "resource": {"attributes": {"service.name": "x"}, "schema_url": None},
            "scope": {"name": None, "version": None, "attributes": {}, "schema_url": None},
            "log": {"body": "claude_code.api_request",
                    "attributes": {"event.name": "api_request", "session.id": "s1", "model": "m"}},
            "received": 1796000000.0, "request": "d" * 32, "index": 0}


def _record(agent: str, kind: str) -> RawRecord:
    return RawRecord(agent, kind, OTEL_LOG, "fp", "0:0", 1796000000000000000, {}, True)


@pytest.mark.parametrize("name", ["canonical", "copilot", "gemini_cli"])
@pytest.mark.parametrize("kind", ["otel_log", "otel_span", "otel_metric"])
def test_a_parser_without_otel_kinds_counts_otel_records(name: str, kind: str) -> None:
    made = registry.load_parser(name)(_record("some-agent", kind))
    assert [(e.name, e.agent, e.attributes["reason"]) for e in made] == \
        [(UNREADABLE, "some-agent", f"{kind} records are not parsed yet")]


def test_claude_code_parses_its_telemetry_itself() -> None:
    # collector.agents.claude_code names all three kinds: its api_request event makes a model call
    parser = registry.load_parser("claude_code")
    assert [e.name for e in parser(_record("claude-code", "otel_log"))] == ["llm.response"]
    assert parser(_record("claude-code", "otel_span")) == parser(_record("claude-code", "otel_metric")) == []


@pytest.mark.parametrize("name", ["codex", "qwen_code"])
@pytest.mark.parametrize("kind", ["otel_log", "otel_span", "otel_metric"])
def test_codex_and_qwen_code_take_their_telemetry_and_skip_other_events(name: str, kind: str) -> None:
    # they name all three kinds (tests/agents/test_own_telemetry.py: their usage events make model calls);
    # a record that is none of their events makes nothing, and is not counted as not parsed yet
    assert registry.load_parser(name)(_record("some-agent", kind)) == []


def test_a_parser_that_names_its_otel_kinds_gets_those(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("otel_parser_for_test")
    seen: list[str] = []

    def parse(record: RawRecord) -> list[object]:
        seen.append(record.kind)
        return []

    parse.__module__ = module.__name__
    module.parse = parse  # type: ignore[attr-defined]
    module.OTEL_KINDS = frozenset({"otel_log"})  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(registry, "parsers", lambda: types.SimpleNamespace(build=lambda _name, _config: parse))
    parser = registry.load_parser("otel_parser_for_test")
    assert parser(_record("a", "otel_log")) == []
    assert parser(_record("a", "otel_span"))[0].name == UNREADABLE
    assert parser(_record("a", "hook")) == []
    assert seen == ["otel_log", "hook"]
