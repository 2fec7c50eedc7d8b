"""A spool line whose ``ts`` is in milliseconds, nanoseconds or centuries away, and a transcript whose file
name is not valid UTF-8, stop nothing (issue 22, item 3): `collect --once` exits 0 twice, every other
record arrives exactly once, the odd times are replaced by the read time and counted in `status`."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from support import assert_no_duplicates, prepare_fixture, read_output
from support.collect_once import CLAUDE, assert_fixture_complete, claude_project, collect_cli

SESSION = "5e55-0000-clock"


def _hook(ts: object, n: int) -> bytes:
    payload = {"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_use_id": f"toolu_clock{n}", "tool_input": {"command": "true"}, "cwd": "/w"}
    return json.dumps({"ts": ts, "agent": "claude-code", "event": "PreToolUse", "payload": payload}).encode() + b"\n"


# a millisecond clock, a nanosecond clock, past 2554 (int64 ns ends in 2262), far past int64, before 1970
ODD_TS = [1_796_040_000_123, 1_796_040_000_123_456_789, 19_000_000_000.0, 1e30, 10**40, -5.0]


def test_spool_times_in_ms_ns_or_out_of_range_stop_nothing(tmp_path: Path) -> None:
    paths = prepare_fixture(CLAUDE, tmp_path)
    with (paths.spool_dir / "claude-code" / "claude-code-2026-11-30.jsonl").open("ab") as spool:
        for n, ts in enumerate(ODD_TS):
            spool.write(_hook(ts, n))
    first, second = collect_cli(paths), collect_cli(paths)
    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    odd = {e["gen_ai.tool.call.id"]: e for e in entries if str(e.get("gen_ai.tool.call.id")).startswith("toolu_clock")}
    assert sorted(odd) == [f"toolu_clock{n}" for n in range(len(ODD_TS))]
    # milliseconds and nanoseconds are recognised; the rest carry the read time and say so
    assert odd["toolu_clock0"]["time_unix_nano"] == 1_796_040_000_123_000_000
    assert odd["toolu_clock1"]["time_unix_nano"] == 1_796_040_000_123_456_789
    assert "collector.time_replaced" not in odd["toolu_clock0"]
    replaced = [k for k, e in odd.items() if e.get("collector.time_replaced") == "out_of_range"]
    assert sorted(replaced) == [f"toolu_clock{n}" for n in range(2, len(ODD_TS))]
    assert first["pipeline"]["times_replaced"] == {"claude-code": 4}
    assert second["pipeline"]["entries"] == 0  # nothing read twice
    rest = Counter(e["event.name"] for e in entries if e.get("gen_ai.session.id") != SESSION)
    assert rest == Counter(json.loads((CLAUDE / "expected.json").read_text())["counts"])


@pytest.mark.parametrize("name", [b"\xff\xfe-not-utf8.jsonl", b"caf\xe9-latin1.jsonl"])
def test_a_transcript_with_a_non_utf8_file_name_is_read_once(tmp_path: Path, name: bytes) -> None:
    paths = prepare_fixture(CLAUDE, tmp_path)
    project = claude_project(paths)
    [transcript] = project.glob("*.jsonl")
    odd = os.path.join(os.fsencode(project), name)
    os.rename(transcript, odd)
    first, second = collect_cli(paths), collect_cli(paths)
    assert_fixture_complete(paths)
    assert first["sources"]["claude-code:transcripts"]["files"] >= 1
    assert second["pipeline"]["entries"] == 0
    with open(odd, "rb") as f:
        again = f.read().replace(b"3717dcf6-6ccc-43e1-999e-09b113fae890", b"3717dcf6-6ccc-43e1-999e-0000000000a2")
    with open(odd, "ab") as f:  # the same session again under another id: read from where it stood, once
        f.write(again)
    collect_cli(paths)
    entries = read_output(paths.output_dir)
    assert_no_duplicates(entries)
    def calls(session: str) -> Counter[str]:
        return Counter(e["event.name"] for e in entries
                       if e.get("gen_ai.session.id") == session and e["event.name"].startswith(("llm.", "tool.")))
    assert calls("3717dcf6-6ccc-43e1-999e-0000000000a2") == calls("3717dcf6-6ccc-43e1-999e-09b113fae890") != Counter()

