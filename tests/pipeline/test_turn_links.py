"""Per-turn upstream spans from correlation files: a prompt matched by the SHA-256 of its text, else by a
prefix, else the session record; each record used once; the whole turn linked; the precedence over the
environment's TRACEPARENT and the text gone after the content policy (through the real Pipeline); the
state saved and loaded back."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from collector.model import AgentActivityEntry, RawRecord
from collector.pipeline.content_policy import ContentPolicy
from collector.pipeline.correlate import Correlator
from collector.pipeline.correlation_files import CorrelationFiles
from collector.pipeline.invocation import PARENT_SPAN_ID, TRACE_ID, Invocations
from collector.pipeline.processor import AgentSettings, Pipeline
from collector.pipeline.turn_links import SOURCE, TurnLinks, decode, prompt_text

SESSION = "41107763-ebf4-494c-ba48-6c6b1ea15d20"
ENV = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
SPANS = {name: (f"{n:x}" * 32, f"{n + 1:x}" * 16) for n, name in enumerate(("a", "b", "c", "d"), start=1)}


def tp(name: str) -> str:
    trace, parent = SPANS[name]
    return f"00-{trace}-{parent}-01"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def turn_record(name: str, text_hash: str = "", prefix: str = "") -> dict[str, Any]:
    return {"type": "turn", "sessionId": SESSION, "contentHash": text_hash, "contentPrefix": prefix,
            "traceparent": tp(name)}


def folder(tmp_path: Path, *records: dict[str, Any]) -> Path:
    (tmp_path / f"{SESSION}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return tmp_path


def prompt(turn: str, text: str | None, session: str = SESSION) -> dict[str, Any]:
    entry: dict[str, Any] = {"event.name": "user.prompt", "gen_ai.agent.type": "qwen-code",
                             "gen_ai.session.id": session, "turn.key": turn}
    if text is not None:
        entry["gen_ai.input.messages"] = [{"role": "user", "parts": [{"type": "text", "content": text}]}]
    return entry


def other(turn: str) -> dict[str, Any]:
    return {"event.name": "llm.response", "gen_ai.agent.type": "qwen-code", "gen_ai.session.id": SESSION,
            "turn.key": turn}


def linked(entry: dict[str, Any]) -> tuple[str, str, str] | None:
    if TRACE_ID not in entry:
        return None
    return entry[TRACE_ID], entry[PARENT_SPAN_ID], entry[SOURCE]


def test_a_prompt_is_matched_by_the_sha256_of_its_text_before_any_prefix(tmp_path: Path) -> None:
    links = TurnLinks(CorrelationFiles(folder(tmp_path, turn_record("a", prefix="Now run"),
                                              turn_record("b", text_hash=sha("Now run `ls -la`.").upper()))))
    entry = prompt("t1", "Now run `ls -la`.")
    links.apply(entry)
    assert linked(entry) == (*SPANS["b"], "turn")


def test_without_a_hash_match_the_first_prefix_the_text_starts_with(tmp_path: Path) -> None:
    links = TurnLinks(CorrelationFiles(folder(tmp_path, turn_record("a", text_hash=sha("other")),
                                              turn_record("b", prefix="Please"), turn_record("c", prefix="Now"))))
    entry = prompt("t1", "Now run `ls -la`.")
    links.apply(entry)
    assert linked(entry) == (*SPANS["c"], "turn")


def test_a_record_is_used_once(tmp_path: Path) -> None:
    links = TurnLinks(CorrelationFiles(folder(tmp_path, turn_record("a", text_hash=sha("continue")),
                                              turn_record("b", text_hash=sha("continue")))))
    first, second, third = prompt("t1", "continue"), prompt("t2", "continue"), prompt("t3", "continue")
    for entry in (first, second, third):
        links.apply(entry)
    assert [linked(e) for e in (first, second, third)] == [(*SPANS["a"], "turn"), (*SPANS["b"], "turn"), None]


def test_the_session_record_goes_to_the_first_prompt_no_turn_record_matched(tmp_path: Path) -> None:
    links = TurnLinks(CorrelationFiles(folder(tmp_path, {"type": "session", "traceparent": tp("d")},
                                              turn_record("a", prefix="Second"))))
    first, second, third = prompt("t1", "First"), prompt("t2", "Second"), prompt("t3", "Third")
    for entry in (first, second, third):
        links.apply(entry)
    assert [linked(e) for e in (first, second, third)] == [(*SPANS["d"], "session"), (*SPANS["a"], "turn"), None]


def test_every_entry_of_a_linked_turn_is_linked_and_the_turn_is_matched_once(tmp_path: Path) -> None:
    links = TurnLinks(CorrelationFiles(folder(tmp_path, turn_record("a", prefix="Fix"),
                                              turn_record("b", prefix="Fix"))))
    entries = [prompt("t1", "Fix it"), other("t1"), prompt("t1", "Fix it"), other("t2")]
    for entry in entries:
        links.apply(entry)
    assert [linked(e) for e in entries] == [(*SPANS["a"], "turn")] * 3 + [None]
    later = prompt("t2", "Fix it too")
    links.apply(later)
    assert linked(later) == (*SPANS["b"], "turn"), "the second record was not used by the turn's repeated prompt"


def test_no_file_no_text_or_another_session_links_nothing(tmp_path: Path) -> None:
    links = TurnLinks(CorrelationFiles(folder(tmp_path, turn_record("a", prefix="Fix"))))
    entries = [prompt("t1", None), prompt("t2", "Fix", session="another"), other("t3"),
               {k: v for k, v in prompt("t4", "Fix").items() if k != "turn.key"}]
    for entry in entries:
        links.apply(entry)
    assert [linked(e) for e in entries] == [None] * 4
    assert not links.problems


def test_the_prompt_text_is_the_user_text_parts() -> None:
    entry = prompt("t", None)
    entry["gen_ai.input.messages"] = [
        {"role": "user", "parts": [{"type": "text", "content": "one"}, {"type": "image", "content": "x"},
                                   {"type": "text", "content": "two"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "not mine"}]}, "junk"]
    assert prompt_text(entry) == "one\ntwo"
    assert prompt_text({"gen_ai.input.messages": 7}) is None


def test_the_state_is_saved_and_a_restart_neither_reuses_a_record_nor_forgets_a_turn(tmp_path: Path) -> None:
    files = folder(tmp_path, turn_record("a", text_hash=sha("go")), turn_record("b", text_hash=sha("go")))
    links = TurnLinks(CorrelationFiles(files))
    links.apply(prompt("t1", "go"))
    saved = dict(links.changes())
    assert json.loads(json.dumps(saved)) == saved, "JSON, for the checkpoint store"
    assert "go" not in json.dumps(saved) and sha("go") not in json.dumps(saved), "no text, no hash kept"
    again = TurnLinks(CorrelationFiles(files), load=saved.get)
    late, second = other("t1"), prompt("t2", "go")
    again.apply(late)
    again.apply(second)
    assert linked(late) == (*SPANS["a"], "turn") and linked(second) == (*SPANS["b"], "turn")
    assert decode({"used": "x", "turns": []}) is None and decode([1]) is None


# -- through the real Pipeline -----------------------------------------------------------------------------


def _parse(record: RawRecord) -> list[AgentActivityEntry]:
    data = record.data
    attrs: dict[str, Any] = {"gen_ai.turn.id": data["turn"]}
    if data["name"] == "user.prompt":
        attrs["gen_ai.input.messages"] = [{"role": "user", "parts": [{"type": "text", "content": data["text"]}]}]
    return [AgentActivityEntry(data["name"], "qwen-code", data["t"], data["t"], f"{data['name']}-{data['t']}",
                               SESSION, attrs)]


def test_the_pipeline_prefers_the_record_to_the_environment_and_drops_the_text(tmp_path: Path) -> None:
    links = TurnLinks(CorrelationFiles(folder(tmp_path, turn_record("a", text_hash=sha("Second prompt")))))
    pipeline = Pipeline({"qwen-code": AgentSettings(_parse, capture=False)}, {}, lambda ids: set(), Correlator(),
                        masking=False, content=ContentPolicy.ephemeral(), invocations=Invocations(link_traces=True),
                        turn_links=links)
    start = RawRecord("qwen-code", "hook", {"name": "session.start", "turn": "", "t": 1,
                                           "traceparent": f"00-{ENV[0]}-{ENV[1]}-01"}, "spool", "0", 1)
    records = [start] + [RawRecord("qwen-code", "transcript", {"name": name, "turn": turn, "t": t, "text": text},
                                   "file", str(t), 1)
                         for name, turn, t, text in [("user.prompt", "t1", 2, "First prompt"),
                                                     ("llm.response", "t1", 3, ""),
                                                     ("user.prompt", "t2", 4, "Second prompt"),
                                                     ("llm.response", "t2", 5, "")]]
    entries = pipeline.process(records).entries
    by_turn = {e["turn.key"]: [] for e in entries if "turn.key" in e}
    for e in entries:
        if "turn.key" in e:
            by_turn[e["turn.key"]].append(e)
    assert {(e[TRACE_ID], e[PARENT_SPAN_ID], e.get(SOURCE)) for e in by_turn["t1"]} == {(*ENV, None)}
    assert {(e[TRACE_ID], e[PARENT_SPAN_ID], e.get(SOURCE)) for e in by_turn["t2"]} == {(*SPANS["a"], "turn")}
    assert not any("gen_ai.input.messages" in e for e in entries), "capture off: the text did not leave"
