"""collector.pipeline.merge: one model call is one llm.response whatever source arrives first."""

from __future__ import annotations

from typing import Any

import pytest

from collector.pipeline import merge
from collector.pipeline.merge import CALL_KEYS, Merger

OUT = "gen_ai.usage.output_tokens"


def _call(eid: str, kind: str, output: int, keys: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"event.id": eid, "event.name": "llm.response", "source.kind": kind, "gen_ai.usage.input_tokens": 100,
            OUT: output, CALL_KEYS: keys, **extra}


def test_a_later_line_of_the_message_corrects_a_placeholder() -> None:
    merger = Merger()
    first = _call("m1", "transcript", 1, **{"gen_ai.usage.incomplete": True})
    assert not merger.review([first]).corrections
    later = _call("m1", "transcript", 17)
    review = merger.review([later])
    assert review.corrections == {id(later)}
    assert later[OUT] == 17 and "gen_ai.usage.incomplete" not in later
    assert later["collector.replaces"] == {OUT: 1} and isinstance(later["collector.correction"], str)
    assert CALL_KEYS not in later


def test_telemetry_after_the_transcript_takes_its_id_and_wins_the_usage() -> None:
    merger = Merger()
    line = _call("m1", "transcript", 1, ["sig:s|m|1|2|3"], **{"gen_ai.usage.incomplete": True,
                                                               "gen_ai.response.id": "msg_1"})
    merger.review([line])
    telemetry = _call("otel1", "otel_log", 17, ["sig:s|m|1|2|3"], **{"gen_ai.usage.cost_usd": 0.5})
    review = merger.review([telemetry])
    assert review.corrections == {id(telemetry)}
    assert telemetry["event.id"] == "m1" and telemetry[OUT] == 17 and telemetry["gen_ai.response.id"] == "msg_1"
    assert telemetry["collector.sources_of"][OUT] == "otel_log"
    assert telemetry["collector.sources_of"]["gen_ai.usage.input_tokens"] == "otel_log"
    assert telemetry["source.kind"] == "transcript"  # the entry's own source: the first


def test_within_a_batch_the_later_is_folded_into_the_earlier() -> None:
    merger = Merger()
    telemetry = _call("otel1", "otel_log", 17, ["req:r1"])
    line = _call("m1", "transcript", 1, ["req:r1"], **{"gen_ai.usage.incomplete": True, "gen_ai.response.id": "x"})
    second_line = _call("m1", "transcript", 1, ["req:r1"], **{"gen_ai.usage.incomplete": True})
    review = merger.review([telemetry, line, second_line])
    assert review.dropped == {id(line), id(second_line)} and not review.corrections
    assert telemetry[OUT] == 17 and telemetry["gen_ai.response.id"] == "x"
    assert "gen_ai.usage.incomplete" not in telemetry


def test_a_less_exact_source_changes_no_usage() -> None:
    merger = Merger()
    merger.review([_call("otel1", "otel_log", 17, ["req:r1"])])
    line = _call("m1", "transcript", 1, ["req:r1"], **{"gen_ai.usage.incomplete": True})
    review = merger.review([line])
    assert review.dropped == {id(line)}  # it brought nothing the call lacked


def test_two_calls_alike_in_their_input_side_stay_two() -> None:
    merger = Merger()
    a = _call("o1", "otel_log", 5, ["req:r1", "sig:s"])
    merger.review([a])
    b = _call("o2", "otel_log", 6, ["req:r2", "sig:s"])  # same kind: never paired by a key
    c = _call("m2", "transcript", 6, ["req:r3", "sig:s"])  # another request id
    review = merger.review([b, c])
    assert not review.dropped and not review.corrections
    assert (b["event.id"], c["event.id"]) == ("o2", "m2")


def test_other_entries_pass_untouched() -> None:
    prompt = {"event.id": "p", "event.name": "user.prompt", CALL_KEYS: ["x"]}
    assert not Merger().review([prompt]).dropped and prompt[CALL_KEYS] == ["x"]


def test_it_remembers_a_bounded_number_of_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(merge, "RECENT", 3)
    merger = Merger()
    for n in range(10):
        merger.review([_call(f"m{n}", "transcript", 1, [f"sig:{n}"])])
    assert len(merger._calls) == 3 and set(merger._keys) == {"sig:7", "sig:8", "sig:9"}
    late = _call("o0", "otel_log", 9, ["sig:0"])
    assert not merger.review([late]).corrections and late["event.id"] == "o0"  # forgotten: the limit
