"""The OTel record sources: the receiver's spool (one line per request, several records) and an agent's
own OTel JSON lines (Copilot's file exporter): the records' shape, and positions that lose nothing when a
batch ends inside a line."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from collector.model.raw import RawRecord
from collector.sources.base import Item
from collector.sources.otlp_files import OtlpFiles, otlp_service_agents
from collector.sources.otlp_records import MAX_DEPTH, TOO_DEEP
from collector.sources.spool_writer import SpoolWriter

FIXTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "copilot" / "otel_file_exporter" / "home" / ".copilot"
           / "otel" / "otel.jsonl")
TRACE_ID = "5b8efff798038103d269b633813fc60c"


def _read(source: OtlpFiles) -> list[Item]:
    async def run() -> list[Item]:
        return [item async for item in source.read()]
    return asyncio.run(run())


def _kv(key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "value": value}


def _export() -> dict[str, Any]:
    resource = {"attributes": [_kv("service.name", {"stringValue": "claude-code"}),
                               _kv("host.arch", {"stringValue": "amd64"})]}
    scope = {"name": "com.anthropic.claude_code", "version": "2.1.29",
             "attributes": [_kv("scope.flag", {"boolValue": True})]}
    records = [{"timeUnixNano": "1796000000000000001", "observedTimeUnixNano": "1796000000000000002",
                "severityNumber": 9, "traceId": TRACE_ID, "spanId": "eee19b7ec3c1b174",
                "body": {"stringValue": "claude_code.api_request"},
                "attributes": [_kv("output_tokens", {"intValue": str(100 + n)}), _kv("cost_usd", {"doubleValue": 0.5}),
                               _kv("tags", {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "2"}]}}),
                               _kv("nested", {"kvlistValue": {"values": [_kv("k", {"bytesValue": "AAE="})]}})]}
               for n in range(3)]
    return {"resourceLogs": [{"resource": resource, "scopeLogs": [{"scope": scope, "logRecords": records}]}]}


def _spool(tmp: Path) -> tuple[OtlpFiles, Path]:
    writer = SpoolWriter(tmp / "spool", fsync=False)
    writer.append("otlp/claude-code", "logs", {"digest": "d" * 32, "export": _export()}, 1796000000.5)
    writer.append("otlp/claude-code", "logs", {"digest": "e" * 32, "export": _export()}, 1796000001.5)
    writer.close()
    spool = next((tmp / "spool" / "otlp" / "claude-code").glob("*.jsonl"))
    return OtlpFiles("claude-code:telemetry", "claude-code", [str(spool.parent / "*.jsonl")], {}, 1 << 20,
                     spooled=True), spool


def test_a_spooled_request_makes_one_plain_record_per_log_record(tmp_path: Path) -> None:
    source, _ = _spool(tmp_path)
    records = [r for r, _ in _read(source) if r is not None]
    assert [(r.kind, r.data["request"], r.data["index"]) for r in records] == \
        [("otel_log", "d" * 32, i) for i in range(3)] + [("otel_log", "e" * 32, i) for i in range(3)]
    first = records[0].data
    assert first["resource"] == {"attributes": {"service.name": "claude-code", "host.arch": "amd64"},
                                 "schema_url": None}
    assert first["scope"] == {"name": "com.anthropic.claude_code", "version": "2.1.29",
                              "attributes": {"scope.flag": True}, "schema_url": None}
    assert first["received"] == 1796000000.5
    log = first["log"]
    assert log["time_unix_nano"] == 1796000000000000001 and log["observed_time_unix_nano"] == 1796000000000000002
    assert (log["trace_id"], log["severity_number"], log["body"]) == (TRACE_ID, 9, "claude_code.api_request")
    assert log["attributes"] == {"output_tokens": 100, "cost_usd": 0.5, "tags": ["a", 2], "nested": {"k": "AAE="}}
    assert [r.data["log"]["attributes"]["output_tokens"] for r in records[:3]] == [100, 101, 102]
    assert len({r.position for r in records}) == 6  # distinct, deterministic positions: "<offset>:<index>"


def test_a_batch_that_ends_inside_a_line_is_read_again_from_the_line(tmp_path: Path) -> None:
    source, spool = _spool(tmp_path)
    items = _read(source)
    first_line_end = spool.read_bytes().index(b"\n") + 1
    offsets = [position.value["offset"] for _, position in items]
    assert offsets == [0, 0, first_line_end, first_line_end, first_line_end, spool.stat().st_size]
    committed = {items[1][1].stream: items[1][1].value}  # a crash after the second record's batch
    again = OtlpFiles("claude-code:telemetry", "claude-code", source.globs, committed, 1 << 20, spooled=True)
    reread = [r for r, _ in _read(again) if r is not None]
    assert [r.position for r in reread] == [r.position for r, _ in items if r is not None]


def test_copilot_file_exporter_lines_become_the_same_records(tmp_path: Path) -> None:
    source = OtlpFiles("copilot:otel", "copilot", [str(FIXTURE)], {}, 1 << 20, spooled=False)
    records: list[RawRecord] = [r for r, _ in _read(source) if r is not None]
    assert [r.kind for r in records] == ["otel_span", "otel_log", "otel_metric", "otel_metric", "otel_metric",
                                         "otel_span"]
    span = records[0].data
    assert span["resource"]["attributes"]["service.name"] == "github-copilot"
    assert (span["scope"]["name"], span["scope"]["version"]) == ("github.copilot", "1.0.40")
    assert span["span"]["start_time_unix_nano"] == 1775934260133000000
    assert span["span"]["end_time_unix_nano"] == 1775934264967317833
    assert (span["span"]["kind"], span["span"]["parent_span_id"]) == (3, "invoke-1")  # JS CLIENT (2) is OTLP's 3
    assert span["span"]["attributes"]["gen_ai.usage.output_tokens"] == 281
    log = records[1].data
    assert log["resource"]["attributes"] == {"service.name": "github-copilot"}
    assert (log["log"]["body"], log["log"]["severity_number"], log["log"]["trace_id"]) == \
        ("GenAI inference: gpt-5.4-mini", 9, "trace-log")
    assert log["log"]["time_unix_nano"] == 1775934264967317833
    histogram = records[2].data["metric"]
    assert (histogram["name"], histogram["type"], histogram["temporality"]) == \
        ("gen_ai.client.token.usage", "histogram", 2)
    assert (histogram["point"]["sum"], histogram["point"]["attributes"]["gen_ai.token.type"]) == (19452, "input")
    assert histogram["point"]["bucket_counts"][8] == 1
    counter = records[4].data["metric"]
    assert (counter["type"], counter["monotonic"], counter["point"]["as_int"]) == ("sum", True, 1)
    tool = records[5].data["span"]
    assert (tool["name"], tool["start_time_unix_nano"], tool["trace_id"]) == \
        ("execute_tool rg", 1775934265000000000, TRACE_ID)


def test_hostile_lines_are_counted_not_fatal(tmp_path: Path) -> None:
    deep: dict[str, Any] = {"stringValue": "x"}
    for _ in range(MAX_DEPTH + 5):
        deep = {"kvlistValue": {"values": [_kv("k", deep)]}}
    export = {"resourceLogs": [{"scopeLogs": [{"logRecords": [
        {"body": deep, "timeUnixNano": "soon", "attributes": "not a list", "severityNumber": True},
        "not an object", {"odd": [[[[[1]]]]]}]}]}]}
    path = tmp_path / "otel.jsonl"
    path.write_bytes(b"not json\n[1, 2]\n" + orjson.dumps({"no": "records"}) + b"\n" + orjson.dumps(export) + b"\n")
    source = OtlpFiles("x:otel", "x", [str(path)], {}, 1 << 20, spooled=False)
    records = [r for r, _ in _read(source) if r is not None]
    assert len(records) == 2
    log = records[0].data["log"]
    assert (log["time_unix_nano"], log["attributes"], log["severity_number"]) == (None, {}, None)
    body = log["body"]
    for _ in range(MAX_DEPTH):
        body = body["k"]
    assert body == TOO_DEEP
    assert records[1].data["log"]["odd"] == [[[[[1]]]]]
    assert source.stats.malformed == 2 and source.stats.extra["otel_lines_without_records"] == 1
    assert source.stats.extra["otel_parts_not_objects"] == 1  # the log record that is a string: counted, not lost


def test_parts_of_another_type_in_a_spooled_request_are_counted(tmp_path: Path) -> None:
    export = _export()
    export["resourceLogs"] += [7, {"scopeLogs": "none", "resource": {}}]
    export["resourceLogs"][0]["scopeLogs"] += [{"logRecords": [[[1]], None]}, "scope"]
    writer = SpoolWriter(tmp_path / "spool", fsync=False)
    writer.append("otlp/claude-code", "logs", {"digest": "d" * 32, "export": export}, 1796000000.5)
    writer.close()
    source = OtlpFiles("claude-code:telemetry", "claude-code", [str(tmp_path / "spool" / "otlp" / "claude-code" /
                                                                    "*.jsonl")], {}, 1 << 20, spooled=True)
    records = [r for r, _ in _read(source) if r is not None]
    assert len(records) == 3  # the good log records still read
    # a resource that is a number, scopeLogs a string, a scope a string, two log records that are no objects
    assert source.stats.extra["otel_parts_not_objects"] == 5


def test_service_names_route_to_the_first_enabled_agent_by_id() -> None:
    from collector.definitions import AgentDefinition

    def agent(agent_id: str, names: list[str], enabled: bool = True) -> AgentDefinition:
        raw = {"id": agent_id, "enabled": enabled, "sources": [{"kind": "spool"},
                                                               {"kind": "otlp", "service_names": names}]}
        return AgentDefinition(agent_id, raw, ())

    mapping = otlp_service_agents([agent("b", ["x", "y"]), agent("a", ["y"]), agent("c", ["z"], enabled=False)])
    assert mapping == {"x": "b", "y": "a"}
