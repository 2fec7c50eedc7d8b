"""The daemon's spool decoder: the hook no longer checks the payload, so a line whose payload is not
valid JSON must be kept (as text), counted, and cost none of its neighbours."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from collector.sources.jsonl_files import JsonlFiles
from collector.sources.spool_lines import DROPPED, PAYLOAD_INVALID, decode_spool_line

HEAD = b'{"ts":1796110000.123456,"agent":"claude-code","event":"PostToolUse","payload":'
ENVELOPE = {"ts": 1796110000.123456, "agent": "claude-code", "event": "PostToolUse"}


def test_hook_line_with_a_valid_payload() -> None:
    assert decode_spool_line(HEAD + b'{"a": [1, "}"]} }') == ({**ENVELOPE, "payload": {"a": [1, "}"]}}, None)


@pytest.mark.parametrize("body", [b"", b"   ", b"null"])
def test_empty_payload_is_null(body: bytes) -> None:
    assert decode_spool_line(HEAD + body + b"}") == ({**ENVELOPE, "payload": None}, None)


@pytest.mark.parametrize(
    "body",
    [b"not json", b'{"a": 1,}', b'1,"agent":"evil","x":2', b'{"a":1},"payload":{"b":2}', b'{"a": "\x01"}',
     b'{"a": NaN}', b'{"a": 1}}', b'"\\ud800"x'],
)
def test_invalid_payload_is_kept_as_text_and_counted(body: bytes) -> None:
    data, counter = decode_spool_line(HEAD + body + b"}")
    assert counter == PAYLOAD_INVALID
    assert data == {**ENVELOPE, "payload": None, "payload_raw": body.decode()}


def test_payload_that_is_not_utf8_is_kept_with_replacement_characters() -> None:
    data, counter = decode_spool_line(HEAD + b'{"a": "\xff\xfe"}}')
    assert counter == PAYLOAD_INVALID and data["payload_raw"] == '{"a": "\ufffd\ufffd"}'


def test_line_of_the_old_hook_that_checked_the_payload_itself() -> None:
    line = HEAD + b'null,"payload_raw":"not json"}'
    assert decode_spool_line(line) == ({**ENVELOPE, "payload": None, "payload_raw": "not json"}, PAYLOAD_INVALID)


def test_drop_marker_is_counted_not_delivered() -> None:
    line = b'{"ts":1796110000.5,"agent":"claude-code","event":"Stop","dropped":"timeout"}'
    assert decode_spool_line(line) == (None, DROPPED)


@pytest.mark.parametrize(
    "envelope",
    [
        {"ts": 1796110000.5, "agent": "claude-code", "event": None, "payload": {"x": 1}},  # the http path
        {"ts": 1796110000.5, "agent": "opencode", "event": "session.idle", "payload": {"y": [2]}},
        {"ts": 1796110000.5, "agent": "claude-code", "event": "odd name \"q\"", "payload": {}},
        {"payload": {"z": 3}, "ts": 17, "agent": "a", "event": "E"},  # another key order
    ],
)
def test_lines_of_other_writers_parse_as_before(envelope: dict[str, Any]) -> None:
    assert decode_spool_line(json.dumps(envelope, separators=(",", ":")).encode()) == (envelope, None)


@pytest.mark.parametrize("line", [b"garbage", b'{"ts":1,"agent":"a"', HEAD + b'{"a": 1'])
def test_a_line_that_is_not_an_envelope_is_malformed(line: bytes) -> None:
    with pytest.raises(ValueError):
        decode_spool_line(line)


def test_spool_source_keeps_every_neighbour_and_counts_the_odd_lines(tmp_path: Path) -> None:
    lines = [
        HEAD + b'{"n": 1}}',
        HEAD + b'{"n": 2, broken}',
        b'{"ts":1796110000.5,"agent":"claude-code","event":"Stop","dropped":"timeout"}',
        HEAD + b'{"n": 3}}',
        b"torn{",
        HEAD + b'{"n": 4}}',
    ]
    (tmp_path / "claude-code-2026-12-01.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    source = JsonlFiles("claude-code:hooks", "claude-code", "hook", [str(tmp_path / "*.jsonl")], {},
                        decode=decode_spool_line)

    async def read() -> list[Any]:
        return [record async for record, _ in source.read()]

    records = [r for r in asyncio.run(read()) if r is not None]
    payloads = [r.data["payload"] for r in records]
    assert payloads == [{"n": 1}, None, {"n": 3}, {"n": 4}]
    assert records[1].data["payload_raw"] == '{"n": 2, broken'
    stats = source.stats.as_dict()
    assert stats[PAYLOAD_INVALID] == 1 and stats[DROPPED] == 1 and stats["malformed"] == 1
    assert stats["records"] == 4


def test_a_bom_and_a_lone_surrogate_cost_no_spool_line() -> None:
    """As in every JSONL source: a BOM before the first line is skipped; a payload with a lone UTF-16
    surrogate escape (a cut emoji) keeps its fields, the surrogate becomes U+FFFD."""
    line = b'{"ts":1.5,"agent":"claude-code","event":"Stop","payload":{"session_id":"s","text":"cut \\ud83d"}}'
    assert decode_spool_line(b"\xef\xbb\xbf" + line) == decode_spool_line(line)
    data, counter = decode_spool_line(line)
    assert counter is None and data["payload"] == {"session_id": "s", "text": "cut \ufffd"}
    whole = b'\xef\xbb\xbf{"agent":"claude-code","event":"Stop","payload":{"session_id":"s"},"ts":1.5}'
    assert decode_spool_line(whole) == ({"agent": "claude-code", "event": "Stop", "payload": {"session_id": "s"},
                                         "ts": 1.5}, None)
