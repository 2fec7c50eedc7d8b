"""The types a definition declares for the fields its parser dispatches on (collector.pipeline.field_types):
checked once before the parser, a wrong-typed one counted in status with its path and types, never the
value. Unit tests of the check, the schema's word on bad declarations, and the real `collect --once` on
a real Claude Code home with a wrong-typed transcript `type` and a hook line whose `event` is a number."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from support import FIXTURES, assert_no_duplicates, prepare_fixture, read_output
from support.collect_once import collect_cli, expected_counts

from collector.definitions import load_definitions
from collector.model import RawRecord
from collector.pipeline.field_types import FieldTypes, record_kinds

CLAUDE = FIXTURES / "claude-code" / "tool_then_answer"


def _record(data: dict[str, object], kind: str = "transcript") -> RawRecord:
    return RawRecord("a", kind, data, "fp", "0", 1)


def test_a_declared_field_of_another_type_is_named_with_its_path_and_types() -> None:
    types = FieldTypes.of_sources([{"kind": "jsonl", "field_types": {
        "type": "string", "payload.call_id": "string", "n": "number", "flag": "boolean",
        "content": ["string", "array"]}}])
    assert types.problems(_record({"type": "x", "payload": {"call_id": "c"}, "n": 1.5, "flag": False,
                                   "content": []})) == []
    assert types.problems(_record({})) == [], "absent is not wrong"
    assert types.problems(_record({"type": None, "payload": None})) == [], "null is how writers say absent"
    assert types.problems(_record({"payload": [1]})) == [], "an enclosing list: its own declaration says so"
    assert types.problems(_record({"type": {"k": "secret"}, "payload": {"call_id": True}, "n": True,
                                   "flag": 0, "content": {}})) == [
        "type is an object, not a string", "payload.call_id is a boolean, not a string",
        "n is a boolean, not a number", "flag is a number, not a boolean",
        "content is an object, not a string or a list"]
    assert "secret" not in " ".join(types.problems(_record({"type": {"k": "secret"}}))), "the shape, not the value"
    assert types.problems(_record({"type": 5}, kind="hook")) == [], "types hold per record kind"


def test_kinds_of_sources_and_the_spool_envelope() -> None:
    assert record_kinds({"kind": "spool"}) == ("hook",)
    assert record_kinds({"kind": "jsonl"}) == ("transcript",)
    assert record_kinds({"kind": "jsonl", "record_kind": "rollout"}) == ("rollout",)
    assert record_kinds({"kind": "json_file"}) == ("json_file", "json_item")
    assert record_kinds({"kind": "command"}) == ("command",)
    assert record_kinds({"kind": "sqlite"}) == ("sqlite",)
    spool = FieldTypes.of_sources([{"kind": "spool"}])
    assert spool.problems(_record({"event": 3, "payload": "text"}, kind="hook")) == [
        "event is a number, not a string", "payload is a string, not an object"], "our envelope, always typed"
    merged = FieldTypes.of_sources([{"kind": "jsonl", "field_types": {"id": "string"}},
                                    {"kind": "jsonl", "field_types": {"id": "integer"}}])
    assert merged.problems(_record({"id": 7})) == [] and merged.problems(_record({"id": "7"})) == []
    assert merged.problems(_record({"id": 7.5})) == ["id is a number, not a string or an integer"]
    assert FieldTypes.of_sources([{"kind": "jsonl"}]).by_kind == {}, "nothing declared: nothing checked"


def test_the_schema_refuses_an_unknown_type_or_path(tmp_path: Path) -> None:
    for n, declared in enumerate(({"type": "text"}, {"a..b": "string"}, {"type": []})):
        (tmp_path / f"bad{n}.json").write_text(json.dumps({
            "id": f"bad-{n}", "name": "x", "parser": "claude_code", "detect": {}, "integrations": [],
            "sources": [{"kind": "spool", "field_types": declared}]}))
    result = load_definitions(tmp_path)
    assert {a for a in result.agents if a.startswith("bad-")} == set()
    assert sorted(Path(p.file).name for p in result.problems) == ["bad0.json", "bad1.json", "bad2.json"]


def test_every_builtin_declaration_holds_for_its_real_fixtures() -> None:
    """A declaration that a real record breaks would drop good records: none does."""
    from support.agents import fixture_records

    definitions = load_definitions().agents
    checked = 0
    for agent, defn in definitions.items():
        types = FieldTypes.of_sources(defn.sources)
        for case in sorted(p.name for p in (FIXTURES / agent).iterdir() if (p / "expected.json").exists()):
            for kind in types.by_kind:
                for record in fixture_records(agent, case, kind):
                    assert types.problems(record) == [], (agent, case, record.data)
                    checked += 1
    assert checked > 1000, checked


def test_wrong_typed_dispatch_fields_are_counted_and_the_neighbours_arrive(tmp_path: Path) -> None:
    paths = prepare_fixture(CLAUDE, tmp_path)
    transcript = next((paths.home / ".claude" / "projects").rglob("*.jsonl"))
    lines = transcript.read_text().splitlines()
    odd = json.loads(next(line for line in lines if '"type":"assistant"' in line.replace(" ", "")))
    odd.update(uuid="00000000-0000-4000-8000-0000000000f1", type={"assistant": True})
    spool = next((paths.spool_dir / "claude-code").glob("*.jsonl"))
    hook = json.loads(spool.read_text().splitlines()[0])
    hook["event"] = 7
    with transcript.open("a") as f:
        f.write(json.dumps(odd) + "\n")
    with spool.open("a") as f:
        f.write(json.dumps(hook) + "\n")
    status = collect_cli(paths)
    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    assert Counter(e["event.name"] for e in entries) == expected_counts(CLAUDE), "every neighbour, once"
    assert status["pipeline"]["unreadable"] == {"claude-code: type is an object, not a string": 1,
                                                "claude-code: event is a number, not a string": 1}
    assert status["quarantine"]["records"] == 0, "a wrong type is counted, not kept to be retried"
    assert collect_cli(paths)["pipeline"]["unreadable"] == {}, "read once: a second run counts nothing again"
