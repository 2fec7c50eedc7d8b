"""The upstream span of a turn: a correlation file's turn record wins over a session record, which wins
over the environment's TRACEPARENT, whatever the order of the turn's entries."""

from __future__ import annotations

from typing import Any

from collector.exporters.trace_links import upstream_of

ENV, SESSION, TURN = ("1" * 32, "2" * 16), ("3" * 32, "4" * 16), ("5" * 32, "6" * 16)


def entry(ids: tuple[str, str] | None, source: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"event.name": "llm.response"}
    if ids is not None:
        out["upstream.trace_id"], out["upstream.parent_span_id"] = ids
    if source is not None:
        out["upstream.correlation"] = source
    return out


def ints(ids: tuple[str, str]) -> tuple[int, int]:
    return int(ids[0], 16), int(ids[1], 16)


def test_a_turn_record_wins_wherever_it_is() -> None:
    entries = [entry(None), entry(ENV), entry(SESSION, "session"), entry(TURN, "turn"), entry(ENV)]
    assert upstream_of(entries) == ints(TURN)
    assert upstream_of(reversed(entries)) == ints(TURN)


def test_a_session_record_wins_over_the_environment() -> None:
    assert upstream_of([entry(ENV), entry(SESSION, "session"), entry(ENV)]) == ints(SESSION)


def test_the_environment_alone_and_nothing() -> None:
    assert upstream_of([entry(None), entry(ENV)]) == ints(ENV)
    assert upstream_of([entry(None), entry(("0" * 32, "2" * 16), "turn")]) is None
