"""Quarantine, not crash: a record that fails after it was read goes to the dead-letter file with its
source position and reason, its neighbours go on, status counts it, and `quarantine list|retry` work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import assert_no_duplicates, collect, make_paths, read_output
from support.robust import Daemon

from collector.cli.main import main
from collector.model import RawRecord, boundary
from collector.pipeline.correlate import Correlator
from collector.pipeline.processor import AgentSettings, Pipeline
from collector.pipeline.quarantine import Quarantine, listing, quarantine_dir

TS = 1_796_040_000.0


def hook(event: str, ts: float, **payload: Any) -> dict[str, Any]:
    return {"ts": ts, "agent": "claude-code", "event": event,
            "payload": {"hook_event_name": event, "session_id": "s1", **payload}}


def spool(paths: Any, lines: list[dict[str, Any]] | list[bytes]) -> Path:
    folder = paths.spool_dir / "claude-code"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "claude-code-2026-11-30.jsonl"
    with path.open("ab") as f:
        for line in lines:
            f.write((line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n")
    return path


def deep(depth: int) -> Any:
    value: Any = "secret-prompt-text"
    for _ in range(depth):
        value = {"x": value}
    return value


SMALL_BOUND = 1000  # MAX_NODES for these tests: a record of more values is refused at the boundary


def wide(values: int = 2 * SMALL_BOUND) -> list[str]:
    """A prompt of more values than the lowered bound allows (a too-deep one is cut, not refused)."""
    return ["secret-prompt-text"] * values


@pytest.fixture
def small_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(boundary, "MAX_NODES", SMALL_BOUND)


def neighbours() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    before = [hook("PreToolUse", TS, tool_use_id="tu-1", tool_name="Bash", tool_input={"command": "ls"})]
    after = [hook("PostToolUse", TS + 1, tool_use_id="tu-1", tool_name="Bash", tool_response={"stdout": "x"})]
    return before, after


def test_a_record_too_large_is_quarantined_and_its_neighbours_go_on(tmp_path: Path, small_bound: None) -> None:
    paths = make_paths(tmp_path)
    before, after = neighbours()
    spool(paths, [*before, hook("UserPromptSubmit", TS + 0.5, prompt=wide()), *after])

    entries = collect(paths)

    assert_no_duplicates(entries)
    names = [e["event.name"] for e in entries if e["event.name"] != "session.status"]
    assert names == ["tool.call", "tool.result"]
    [line] = listing(quarantine_dir(paths))
    assert (line["stage"], line["reason"]) == ("boundary", f"more than {SMALL_BOUND} values")
    assert line["path"].endswith("claude-code-2026-11-30.jsonl") and line["position"].isdigit()
    assert "data" not in line and b"secret-prompt-text" not in (quarantine_dir(paths) / "quarantine.jsonl").read_bytes()
    status = json.loads((paths.state_dir / "status.json").read_text())
    assert status["quarantine"]["by_source"] == {"claude-code:hook": {f"boundary: more than {SMALL_BOUND} values": 1}}

    again = collect(paths)  # the quarantined record is never processed again, nothing is repeated
    assert [e["event.id"] for e in again] == [e["event.id"] for e in entries]
    assert len(listing(quarantine_dir(paths))) == 1


def test_with_capture_on_the_quarantine_keeps_the_record_masked(tmp_path: Path) -> None:
    def failing(record: RawRecord) -> list[Any]:
        raise KeyError("boom")

    quarantine = Quarantine(tmp_path / "q")
    pipeline = Pipeline({"a": AgentSettings(failing, capture=True)}, {"user.id": "u"}, lambda ids: set(),
                        Correlator(), quarantine=quarantine)
    key = "AKIA" + "ABCDEFGHIJKLMNOP"
    record = RawRecord("a", "hook", {"payload": {"prompt": f"my key is {key}"}}, "fp", "12", 1, {"path": "/s"})
    assert pipeline.process([record]).entries == []
    [line] = listing(tmp_path / "q")
    assert (line["stage"], line["reason"], line["position"]) == ("parse", "KeyError", "12")
    assert line["data"] == {"payload": {"prompt": "my key is [REDACTED:aws_access_key_id]"}}
    assert quarantine.stats() == {"records": 1, "by_source": {"a:hook": {"parse: KeyError": 1}}}


def test_every_stage_after_parsing_quarantines_instead_of_raising(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from collector.agents.registry import load_parser
    from collector.definitions import load_definitions

    parse = load_parser(load_definitions(None).agents["claude-code"].parser)
    before, after = neighbours()
    records = [RawRecord("claude-code", "hook", d, "fp", str(i), 1, {"path": "/s"})
               for i, d in enumerate([*before, hook("UserPromptSubmit", TS + 0.5, prompt="p"), *after])]

    def explode(entry: dict[str, Any], *args: Any) -> Any:
        if entry.get("event.name") == "user.prompt":
            raise RuntimeError("stage failed")
        return entry

    for stage, target, fake in (
            ("correlate", "collector.pipeline.correlate.Correlator.apply", lambda self, e: explode(e)),
            ("policy", "collector.pipeline.content_policy.ContentPolicy.apply", lambda self, e, c: explode(e)),
            ("mask", "collector.pipeline.masking.Masker.mask_entry", lambda self, e: explode(e))):
        with monkeypatch.context() as patch:
            patch.setattr(target, fake)
            quarantine = Quarantine(None)
            pipeline = Pipeline({"claude-code": AgentSettings(parse)}, {"user.id": "u"}, lambda ids: set(),
                                Correlator(), quarantine=quarantine)
            out = pipeline.process(records).entries
        assert [e["event.name"] for e in out] == ["tool.call", "tool.result"], stage
        assert quarantine.stats()["by_source"] == {"claude-code:hook": {f"{stage}: RuntimeError": 1}}


def test_boundary_types_ids_times_and_tokens() -> None:
    now = 1_796_040_000 * 10**9
    entry = {"schema.version": "1.0", "event.id": "0" * 32, "event.name": "llm.response",
             "time_unix_nano": -5, "observed_time_unix_nano": now, "gen_ai.agent.type": "a",
             "gen_ai.session.id": 42, "gen_ai.response.id": ["x"], "gen_ai.usage.input_tokens": -3,
             "gen_ai.usage.output_tokens": 2**64, "gen_ai.usage.reasoning_tokens": 7.0,
             "gen_ai.response.finish_reasons": ["stop", 3, None], "agent.extra": {"big": 2**70}}
    boundary.check_entry(entry)
    assert entry["time_unix_nano"] == now and entry["collector.time_replaced"] == "out_of_range"
    assert entry["gen_ai.session.id"] == "42" and entry["gen_ai.usage.reasoning_tokens"] == 7
    assert "gen_ai.response.id" not in entry and "gen_ai.usage.input_tokens" not in entry
    assert entry["gen_ai.response.finish_reasons"] == ["stop", "3"]
    assert entry["agent.extra"] == {"big": str(2**70)}
    assert sorted(entry["collector.invalid_fields"]) == [
        "gen_ai.response.id: a list, not a string", "gen_ai.usage.input_tokens: outside 0..2**53-1",
        "gen_ai.usage.output_tokens: outside 0..2**53-1"]
    with pytest.raises(boundary.Refused):
        boundary.check_entry({"event.name": "tool.call", "time_unix_nano": now, "observed_time_unix_nano": now,
                              "gen_ai.tool.call.id": {"a": 1}})


def test_boundary_field_types_match_the_schema() -> None:
    schema = json.loads((Path(__file__).parents[2] / "schemas" / "activity-event.schema.json").read_text())
    props = schema["properties"]
    strings = {k for k, v in props.items() if v.get("type") == "string" and "enum" not in v and "const" not in v}
    counts = {k for k, v in props.items() if v.get("type") == "integer" and not k.endswith("unix_nano")}
    # ours, always strings (turn.key, workspace.root and the upstream span are set after the boundary check)
    ours_strings = {"event.id", "turn.key", "workspace.root", "collector.truncated", "upstream.trace_id",
                    "upstream.parent_span_id", "collector.correction"}  # the merge's digest of a correction
    assert strings - ours_strings == set(boundary.STRING_FIELDS)
    assert counts == boundary.COUNT_FIELDS
    ours = {"event.name", "collector.time_replaced"}
    assert {k for k, v in props.items() if "enum" in v and k not in ours} == set(boundary.ENUM_FIELDS)


def test_epoch_numbers_in_seconds_ms_us_ns_are_recognised() -> None:
    from collector.agents.common import iso_to_ns

    ns = 1_796_040_000_123_000_000
    assert iso_to_ns(1_796_040_000.123) == pytest.approx(ns, abs=1000)
    assert iso_to_ns(1_796_040_000_123) == ns
    assert iso_to_ns(1_796_040_000_123_000) == ns
    assert iso_to_ns(ns) == ns
    assert iso_to_ns(0) is None and iso_to_ns("1970-01-01T00:00:00Z") is None  # "no time": missing
    assert iso_to_ns("0001-01-01T00:00:00Z") is None and iso_to_ns(float("inf")) is None
    assert iso_to_ns(-1) == -1_000_000_000 and iso_to_ns(-0.5) == -500_000_000  # before 1970: kept, so
    assert iso_to_ns("1960-01-01T00:00:00Z") == -315_619_200 * 10**9  # the boundary replaces and flags it


def test_a_time_before_1970_from_a_transcript_is_replaced_and_flagged() -> None:
    from collector.agents import claude_code
    from collector.model import RawRecord

    now = 1_796_040_000 * 10**9
    line = {"type": "user", "sessionId": "s1", "uuid": "u1", "timestamp": "1960-01-01T00:00:00Z",
            "message": {"role": "user", "content": "hello"}}
    record = RawRecord("claude-code", "transcript", line, "fp", "0", now, {"path": "/x/s1.jsonl"})
    [entry] = [e.to_dict() for e in claude_code.parse(record)]
    boundary.check_entry(entry)
    assert entry["time_unix_nano"] == now and entry["collector.time_replaced"] == "out_of_range"
    assert entry["event.name"] == "user.prompt"


def test_retry_feeds_the_records_again_and_a_fixed_one_leaves_the_quarantine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_bound: None) -> None:
    home = tmp_path / "home"
    home.mkdir()
    paths = make_paths(tmp_path, home)
    monkeypatch.setenv("AGENT_COLLECTOR_DATA_DIR", str(paths.data_dir))
    monkeypatch.setenv("AGENT_COLLECTOR_CONFIG_DIR", str(paths.config_dir))
    before, after = neighbours()
    spool(paths, [*before, hook("UserPromptSubmit", TS + 0.5, prompt=wide(), prompt_id="p1"), *after])
    assert main(["collect", "--once", "--home", str(home), "-q"]) == 0
    [line] = listing(quarantine_dir(paths))

    assert main(["quarantine", "retry", "--home", str(home)]) == 0  # fails again: back, attempts 2
    [again] = listing(quarantine_dir(paths))
    assert (again["id"], again["attempts"]) == (line["id"], 2)

    monkeypatch.setattr(boundary, "MAX_NODES", 1_000_000)  # "the upgrade that fixed it"
    assert main(["quarantine", "retry", "--home", str(home), line["id"]]) == 0
    assert listing(quarantine_dir(paths)) == []
    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    assert [e["event.name"] for e in entries if e["event.name"] != "session.status"] == [
        "tool.call", "tool.result", "user.prompt"]


def test_quarantine_list_prints_source_stage_and_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str], small_bound: None) -> None:
    home = tmp_path / "home"
    home.mkdir()
    paths = make_paths(tmp_path, home)
    monkeypatch.setenv("AGENT_COLLECTOR_DATA_DIR", str(paths.data_dir))
    monkeypatch.setenv("AGENT_COLLECTOR_CONFIG_DIR", str(paths.config_dir))
    spool(paths, [hook("UserPromptSubmit", TS, prompt=wide())])
    assert main(["collect", "--once", "--home", str(home), "-q"]) == 0
    capsys.readouterr()
    assert main(["quarantine", "list", "--home", str(home)]) == 0
    table = capsys.readouterr().out
    assert "claude-code:hook" in table and "boundary" in table and f"more than {SMALL_BOUND} values" in table
    assert main(["quarantine", "list", "--json", "--home", str(home)]) == 0
    assert json.loads(capsys.readouterr().out)[0]["stage"] == "boundary"
    assert main(["status", "--home", str(home)]) == 0
    status = capsys.readouterr().out
    assert "QUARANTINED FROM" in status and f"boundary: more than {SMALL_BOUND} values" in status


def test_the_quarantine_file_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from collector.pipeline import quarantine as module

    monkeypatch.setattr(module, "MAX_BYTES", 4000)
    q = Quarantine(tmp_path)
    for n in range(100):
        q.add(RawRecord("a", "hook", {}, "fp", str(n), 1, {"path": "/p"}), "parse", "KeyError", False)
    sizes = [p.stat().st_size for p in tmp_path.iterdir()]
    assert len(sizes) == 2 and max(sizes) <= 4000


def test_the_int_tool_use_id_post_does_not_kill_the_daemon(tmp_path: Path) -> None:
    """The repro of the issue: this one POST used to make the daemon exit 1, and again on every restart."""
    daemon = Daemon(tmp_path).start()
    try:
        before, after = neighbours()
        bodies = [before[0]["payload"], {"hook_event_name": "PreToolUse", "session_id": "s", "tool_use_id": 5},
                  {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "prompt": deep(100)},
                  after[0]["payload"]]
        assert [daemon.post("claude-code", json.dumps(b).encode()) for b in bodies] == [200, 200, 200, 200]
        entries = daemon.wait_output(lambda es: len([e for e in es if e["event.name"].startswith("tool.")]) >= 3
                                     and any(e["event.name"] == "user.prompt" for e in es))
        assert daemon.get("/v1/status")  # still answers
    finally:
        assert daemon.stop() == 0
    assert_no_duplicates(entries)
    calls = sorted(e["gen_ai.tool.call.id"] for e in entries if e["event.name"] == "tool.call")
    assert calls == ["5", "tu-1"]
    [prompt] = [e for e in entries if e["event.name"] == "user.prompt"]
    assert prompt["collector.truncated"] == "nested deeper than 64", "the deep prompt is read, its depths cut"
    assert daemon.status_file()["quarantine"]["records"] == 0
    assert daemon.status_file()["pipeline"]["truncated"] == {"claude-code": 1}
    written = [e["event.id"] for e in read_output(daemon.out)]
    daemon.start()  # and the restart does not meet them again
    try:
        assert daemon.get("/v1/status")
    finally:
        assert daemon.stop() == 0
    assert [e["event.id"] for e in read_output(daemon.out)] == written


def test_a_lone_surrogate_in_a_record_becomes_u_fffd_before_any_encoder(tmp_path: Path) -> None:
    from collector.agents.registry import load_parser
    from collector.definitions import load_definitions

    parse = load_parser(load_definitions(None).agents["claude-code"].parser)
    quarantine = Quarantine(tmp_path / "q")
    pipeline = Pipeline({"claude-code": AgentSettings(parse, capture=True)}, {"user.id": "u"}, lambda ids: set(),
                        Correlator(), quarantine=quarantine)
    data = hook("UserPromptSubmit", TS, prompt="cut \ud83d", prompt_id="p\udc00")
    data["payload"]["session_id"] = "s\ud800"
    out = pipeline.process([RawRecord("claude-code", "hook", data, "fp", "0", 1, {"path": "/s"})]).entries
    [prompt] = [e for e in out if e["event.name"] == "user.prompt"]
    assert prompt["gen_ai.session.id"] == "s\ufffd"
    assert "\ufffd" in json.dumps(prompt, ensure_ascii=False) and quarantine.added == 0
