"""The JSONL output takes a correction (docs/merge.md) as a line of its own, once: after the entry it
corrects, and not again when the same correction is offered again, in this run or the next."""

from __future__ import annotations

import json
from pathlib import Path

from collector.exporters.jsonl import JsonlExporter

ENTRY = {"event.id": "a", "event.name": "llm.response", "time_unix_nano": 1796037335044000000,
         "gen_ai.usage.output_tokens": 1}
FIXED = {**ENTRY, "gen_ai.usage.output_tokens": 17, "collector.correction": "d1",
         "collector.replaces": {"gen_ai.usage.output_tokens": 1}}


def _lines(out: Path) -> list[dict[str, object]]:
    return [json.loads(x) for p in sorted(out.glob("*.jsonl")) for x in p.read_text().splitlines()]


def test_a_correction_is_written_once_after_its_entry(tmp_path: Path) -> None:
    run = JsonlExporter(tmp_path)
    run.export([ENTRY])
    run.export([FIXED, ENTRY])
    run.export([FIXED])
    assert [e["gen_ai.usage.output_tokens"] for e in _lines(tmp_path)] == [1, 17]
    assert run.skipped_duplicates == 2
    again = JsonlExporter(tmp_path)  # a restart reads the ids back from the file
    again.export([FIXED, {**FIXED, "collector.correction": "d2", "gen_ai.usage.output_tokens": 18}])
    assert [e["gen_ai.usage.output_tokens"] for e in _lines(tmp_path)] == [1, 17, 18]
