"""The pre-test on a raw line (``decode_only``): a line is skipped undecoded only when it cannot make an
entry; anything it cannot judge is decoded."""

from __future__ import annotations

import json

import pytest
from support import ROOT

import collector.agents.claude_code as claude_code
from collector.definitions import load_definitions
from collector.model import RawRecord
from collector.sources.line_filter import LineFilter

FILTER = LineFilter.of({"field": "type", "values": ["assistant", "user"]})


@pytest.mark.parametrize("line", [
    b'{"type":"assistant","message":{"type":"message"}}',
    b'{"parentUuid":null,"type" : "user"}',
    b'{"type":"attachment","inner":{"type":"user"}}',  # a nested one: decoded, the parser decides
    b'{"type":7}', b'{"type":{"a":1}}', b'{"type":true}', b'{"type":null}', b'{"type":["user"]}',
    b'{"type":"us\\u0065r"}',  # an escaped value could be anything
    b'{"type":"unterminated',
])
def test_a_line_that_may_make_an_entry_is_decoded(line: bytes) -> None:
    assert FILTER is not None and not FILTER.skips(line)


@pytest.mark.parametrize("line", [
    b'{"type":"attachment","attachment":{"type":"file","content":"x"}}',
    b'{"type":"queue-operation"}',
    b'{"uuid":"u","text":"no kind at all"}',
    b'{"type":"attachment","content":"he wrote \\"type\\":\\"user\\" here"}',  # inside a string: escaped
])
def test_a_line_that_cannot_make_an_entry_is_skipped(line: bytes) -> None:
    assert FILTER is not None and FILTER.skips(line)


def test_no_declaration_no_filter() -> None:
    assert LineFilter.of(None) is None and LineFilter.of({}) is None


def test_claude_codes_declaration_is_its_parsers_dispatch() -> None:
    [spec] = [s for s in load_definitions().agents["claude-code"].sources if s.get("decode_only")]
    assert set(spec["decode_only"]["values"]) == set(claude_code._TRANSCRIPT)


def test_every_line_claude_code_skips_in_the_fixtures_makes_nothing() -> None:
    """Over every real Claude Code transcript line in the fixtures: a skipped line's parse is empty."""
    [spec] = [s for s in load_definitions().agents["claude-code"].sources if s.get("decode_only")]
    rule = LineFilter.of(spec["decode_only"])
    assert rule is not None
    skipped = decoded = 0
    for path in sorted((ROOT / "tests" / "fixtures").rglob("*.jsonl")):
        if "/.claude/projects/" not in str(path):
            continue
        for line in path.read_bytes().splitlines():
            if not line.strip():
                continue
            data = json.loads(line)
            if not isinstance(data, dict):
                continue
            if rule.skips(line):
                skipped += 1
                record = RawRecord("claude-code", "transcript", data, "fp", "0", 1)
                assert claude_code.parse(record) == [], line[:200]
            else:
                decoded += 1
    assert skipped > 0 and decoded > 0, (skipped, decoded)

