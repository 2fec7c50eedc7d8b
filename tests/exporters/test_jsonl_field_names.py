"""``[jsonl] field_names = "pilot"``: the output uses LoongSuite Pilot's names where they differ from ours
(``collector.model.pilot_names``), so a team's queries over Pilot's files keep working; the usage store's
rebuild reads such a file back with our names, and reading back after a restart still knows its ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support import read_output

from collector.exporters.jsonl import JsonlExporter
from collector.model.pilot_names import from_pilot_output
from collector.usage.rebuild import rebuild
from collector.usage.store import UsageStore


def entries() -> list[dict[str, Any]]:
    base = {"schema.version": "1", "gen_ai.session.id": "s", "gen_ai.agent.type": "claude-code",
            "time_unix_nano": 1796032800000000000}
    return [
        {**base, "event.id": "a", "event.name": "tool.result", "gen_ai.tool.call.id": "c", "duration_ms": 12.6},
        {**base, "event.id": "b", "event.name": "llm.response", "duration_ms": 900, "gen_ai.usage.cost_usd": 0.5,
         "workspace.root": "/w", "gen_ai.usage.input_tokens": 10},
        {**base, "event.id": "c", "event.name": "user.prompt"},
    ]


def test_pilot_names_where_they_differ_and_ours_elsewhere(tmp_path: Path) -> None:
    exporter = JsonlExporter(tmp_path, field_names="pilot")
    exporter.export(entries())
    result, response, prompt = read_output(tmp_path)
    assert result["gen_ai.tool.call.duration"] == 13 and "duration_ms" not in result  # Pilot's is an integer
    assert response["duration_ms"] == 900  # a model call's latency has no Pilot name
    assert response["gen_ai.usage.total_cost"] == 0.5 and response["workspace.current_root"] == "/w"
    assert "gen_ai.usage.cost_usd" not in response and "workspace.root" not in response
    assert prompt == entries()[2]
    assert from_pilot_output(result)["duration_ms"] == 13 and from_pilot_output(response) == {
        **entries()[1], "duration_ms": 900}


def test_the_usage_store_is_rebuilt_from_a_pilot_named_output(tmp_path: Path) -> None:
    JsonlExporter(tmp_path / "out", field_names="pilot").export(entries())
    store = UsageStore(tmp_path / "usage.sqlite")
    done = rebuild(store, tmp_path / "out", "test")
    assert done is not None and (done.entries, done.bad_lines) == (3, 0)
    rows = store._db.execute("SELECT name, agent_cost_usd, input, duration_ms FROM events ORDER BY name").fetchall()
    assert ("llm.response", 0.5, 10, 900) in [tuple(r) for r in rows]
    assert ("tool.result", None, 0, 13) in [tuple(r) for r in rows]  # Pilot's duration read back as ours


def test_the_default_is_ours_and_the_encoded_line_is_written(tmp_path: Path) -> None:
    exporter = JsonlExporter(tmp_path)
    batch = entries()
    exporter.export(batch)
    assert read_output(tmp_path) == batch


def test_a_restart_knows_the_ids_of_a_pilot_named_file(tmp_path: Path) -> None:
    JsonlExporter(tmp_path, field_names="pilot").export(entries())
    again = JsonlExporter(tmp_path, {}, field_names="pilot")  # no checkpoint mark: everything read back
    again.export(entries())
    assert again.skipped_duplicates == 3 and len(read_output(tmp_path)) == 3
