"""Global custom attributes: config, then the environment's OTEL_*_ATTRIBUTES, then the live file; fill-only,
the collector's names refused and counted; the live file read again when it changed, a broken one counted
and read as empty."""

from __future__ import annotations

import os
from pathlib import Path

from collector.pipeline.attributes import GlobalAttributes, attribute_file, checked, key_problem, pair_problem


def test_later_sources_win_and_entries_keep_their_own_fields(tmp_path: Path) -> None:
    live = attribute_file(tmp_path)
    live.write_text('{"c": "file", "d": "file"}')
    env = {"OTEL_RESOURCE_ATTRIBUTES": "b=resource,c=resource", "OTEL_SPAN_ATTRIBUTES": "c=span"}
    stamps = GlobalAttributes({"a": "config", "b": "config"}, env, live)
    entry = {"event.name": "tool.call", "d": "the entry's own"}
    stamps.apply(entry)
    assert entry == {"event.name": "tool.call", "a": "config", "b": "resource", "c": "file", "d": "the entry's own",
                     "collector.custom_attributes": ["a", "b", "c"]}, "the keys it added are named"
    assert stamps.problems == {}


def test_the_collectors_names_and_bad_values_are_refused_and_counted(tmp_path: Path) -> None:
    env = {"OTEL_SPAN_ATTRIBUTES": "gen_ai.agent.type=x,ok=1", "OTEL_RESOURCE_ATTRIBUTES": "a=1,broken"}
    stamps = GlobalAttributes({"user.id": "x", "vcs.ref.head.name": "y", "fine": "z", "bad": "a\u2028b"}, env, None)
    entry: dict[str, str] = {}
    stamps.apply(entry)
    assert entry == {"fine": "z", "ok": "1", "collector.custom_attributes": ["fine", "ok"]}, \
        "the malformed OTEL_RESOURCE_ATTRIBUTES is discarded whole"
    reasons = sorted(stamps.problems)
    assert len(reasons) == 5, reasons
    assert any(r.startswith("OTEL_RESOURCE_ATTRIBUTES: discarded") for r in reasons)
    assert sum("sets itself" in r for r in reasons) == 3
    assert any("control character" in r for r in reasons)


def test_key_and_value_rules() -> None:
    assert key_problem("team") is None and key_problem("_x.y-z") is None
    assert key_problem("a b") and key_problem("1team") and key_problem("x" * 129)
    assert key_problem("upstream.trace_id") and key_problem("agent_collector.incomplete")
    assert pair_problem("team", 1) == "its value is not a string"
    assert pair_problem("team", "x" * 513) and pair_problem("team", "x" * 512) is None
    assert pair_problem(3, "x") == "not a string key"
    problems: dict[str, int] = {}
    assert len(checked({f"k{n}": "v" for n in range(130)}, "here", problems)) == 128
    assert sum(problems.values()) == 2


def test_the_live_file_is_read_again_at_a_refresh_when_it_changed(tmp_path: Path) -> None:
    live = attribute_file(tmp_path)
    stamps = GlobalAttributes({}, {}, live)
    assert stamps.current() == {}, "no file: nothing"
    live.write_text('{"team": "a"}')
    assert stamps.current() == {}, "not looked at before the next refresh (the next batch)"
    stamps.refresh()
    assert stamps.current() == {"team": "a"}
    live.write_text('{"team": "b", "x": "y"}')
    os.utime(live, ns=(1, 1))  # a change whose mtime went back still moves the stamp (size too)
    stamps.refresh()
    assert stamps.current() == {"team": "b", "x": "y"}
    live.unlink()
    stamps.refresh()
    assert stamps.current() == {}


def test_a_broken_live_file_is_counted_and_read_as_empty_until_fixed(tmp_path: Path) -> None:
    live = attribute_file(tmp_path)
    stamps = GlobalAttributes({"a": "config"}, {}, live)
    for n, body in enumerate(['["not", "an object"]', "{not json", '{"team": 1}']):
        live.write_text(body + " " * n)
        stamps.refresh()
        assert stamps.current() == {"a": "config"}, body
    live.unlink()
    live.mkdir()
    stamps.refresh()
    assert stamps.current() == {"a": "config"}
    live.rmdir()
    live.write_text('{"team": "fixed"}')
    stamps.refresh()
    assert stamps.current() == {"a": "config", "team": "fixed"}
    assert len(stamps.problems) == 4 and all(r.startswith(str(live)) for r in stamps.problems), stamps.problems
