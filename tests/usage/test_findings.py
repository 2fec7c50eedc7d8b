"""``report findings`` on a store written by the real ``UsageStore`` with entries that show each waste pattern
(no captured fixture repeats a call or fails one tool three times in a row), and a store of schema 5 getting the
detail columns."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from collector.usage.findings import Thresholds, build_findings
from collector.usage.query import Filters
from collector.usage.store import DETAIL_COLUMNS, SCHEMA_VERSION, UsageStore, connect
from collector.usage.tool_report import build_tools

T0 = 1_790_000_000 * 10**9


def _entry(n: int, name: str, **fields: Any) -> dict[str, Any]:
    return {"event.id": f"{n:032x}", "event.name": name, "time_unix_nano": T0 + n * 10**9,
            "gen_ai.agent.type": "claude-code", "gen_ai.session.id": "s1", "gen_ai.turn.id": "t1", **fields}


def _tool(n: int, tool: str, digest: str, status: str = "success", size: int = 400,
          **fields: Any) -> list[dict[str, Any]]:
    call = {"gen_ai.tool.name": tool, "gen_ai.tool.call.id": f"c{n}", "gen_ai.tool.call.arguments.hmac": digest}
    return [_entry(n, "tool.call", **call, **fields),
            _entry(n + 1, "tool.result", **call, **fields, **{"tool.result.status": status, "duration_ms": 10,
                                                             "gen_ai.tool.call.result.length": size})]


def _llm(n: int, **fields: Any) -> dict[str, Any]:
    return _entry(n, "llm.response", **{"gen_ai.response.model": "claude-sonnet-4-5", "gen_ai.usage.input_tokens": 100,
                                         "gen_ai.usage.output_tokens": 10}, **fields)


def _store(tmp_path: Path, entries: list[dict[str, Any]]) -> Path:
    path = tmp_path / "usage.sqlite"
    store = UsageStore(path)
    store.add(entries)
    store.close()
    return path


def _findings(path: Path, limits: Thresholds | None = None) -> list[dict[str, Any]]:
    with closing(connect(path, readonly=True)) as db:
        return list(build_findings(db, Filters(), limits)["rows"])


def test_a_file_read_twice_in_one_context_is_a_repeated_read(tmp_path: Path) -> None:
    sub = {"gen_ai.agent.scope": "subagent", "gen_ai.agent.id": "a1"}
    entries = [*_tool(10, "Read", "d1"), _llm(12), *_tool(20, "Read", "d1"), _llm(22),
               *_tool(30, "Read", "d2"),  # other arguments
               *_tool(40, "Read", "d1", **sub)]  # the same file, but in the subagent's own context
    found = _findings(_store(tmp_path, entries))
    repeats = [f for f in found if f["kind"] == "repeated_read"]
    assert len(repeats) == 1
    assert repeats[0]["tool"] == "Read"
    assert repeats[0]["evidence"]["calls"] == 2 and repeats[0]["evidence"]["arguments_digest"] == "d1"
    assert repeats[0]["evidence"]["subagent"] is None
    assert repeats[0]["evidence"]["times_unix_nano"] == [T0 + 10 * 10**9, T0 + 20 * 10**9]


def test_three_failures_of_one_tool_in_a_row_are_a_retry_loop(tmp_path: Path) -> None:
    entries = [*_tool(10, "Bash", "a", "error"), *_tool(20, "Bash", "b", "error"), *_tool(30, "Bash", "c", "error"),
               *_tool(40, "Bash", "d"),  # a success ends the run
               *_tool(50, "Bash", "e", "error"), *_tool(60, "Bash", "f", "error")]  # two only: below the threshold
    loops = [f for f in _findings(_store(tmp_path, entries)) if f["kind"] == "retry_loop"]
    assert [(f["tool"], f["evidence"]["failures_in_a_row"]) for f in loops] == [("Bash", 3)]
    assert loops[0]["evidence"]["first_unix_nano"] == T0 + 11 * 10**9


def test_a_tool_whose_results_fill_the_context_dominates(tmp_path: Path) -> None:
    # Grep: 40,000 bytes = 10,000 tokens, in the input of the 3 calls after it = 30,000; Read: 100 tokens x 1
    entries = [*_tool(10, "Grep", "g", size=40_000), _llm(12), _llm(13), *_tool(20, "Read", "r"), _llm(22)]
    path = _store(tmp_path, entries)
    with closing(connect(path, readonly=True)) as db:
        tools = {r["tool"]: r for r in build_tools(db, Filters())["rows"]}
    assert tools["Grep"]["context_tokens_est"] == 30_000 and tools["Read"]["context_tokens_est"] == 100
    assert tools["Grep"]["result_tokens_est"] == 10_000 and tools["Grep"]["mean_duration_ms"] == 10
    dominant = [f for f in _findings(path) if f["kind"] == "dominant_tool"]
    assert [f["tool"] for f in dominant] == ["Grep"]
    assert dominant[0]["evidence"]["share"] == round(30_000 / 30_100, 6)
    assert not [f for f in _findings(path, Thresholds(dominant_tokens=30_001)) if f["kind"] == "dominant_tool"]


def test_captured_arguments_get_a_digest_and_results_their_size(tmp_path: Path) -> None:
    """With content capture on the entry carries the text: the store keeps its digest and size, not the text."""
    args = {"gen_ai.tool.name": "Read", "gen_ai.tool.call.arguments": {"file_path": "/src/app.py"}}
    entries = [_entry(1, "tool.call", **args), _entry(2, "tool.call", **args),
               _entry(3, "tool.result", **args, **{"gen_ai.tool.call.result": "x" * 9})]
    path = _store(tmp_path, entries)
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT args_digest, result_bytes FROM events ORDER BY time_ns").fetchall()
        text = "".join(str(r) for r in db.execute("SELECT * FROM events"))
    assert rows[0][0] == rows[1][0] == rows[2][0] and len(rows[0][0]) == 32
    assert rows[2][1] == 9 and "app.py" not in text
    assert [f["kind"] for f in _findings(path)] == ["repeated_read"]


def test_a_store_of_schema_5_gets_the_detail_columns(tmp_path: Path) -> None:
    path = _store(tmp_path, [*_tool(10, "Read", "d1")])
    with closing(sqlite3.connect(path)) as db:
        for column in DETAIL_COLUMNS:
            db.execute(f"ALTER TABLE events DROP COLUMN {column}")
        db.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
        db.commit()
    with closing(connect(path, readonly=True)) as db:  # read as it is: no detail, no error
        assert build_tools(db, Filters())["rows"][0]["result_bytes"] == 0
    store = UsageStore(path)
    store.add([*_tool(20, "Read", "d1")])
    store.close()
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        assert db.execute("SELECT args_digest, result_bytes FROM events ORDER BY id").fetchall() == [
            (None, None), (None, None), ("d1", None), ("d1", 400)]


def test_results_without_their_calls_still_show_a_repeat(tmp_path: Path) -> None:
    """An agent that records only the result of a tool call: the results' digests count."""
    results = [row for n in (10, 20) for row in _tool(n, "Read", "d1") if row["event.name"] == "tool.result"]
    repeats = [f for f in _findings(_store(tmp_path, results)) if f["kind"] == "repeated_read"]
    assert [(f["tool"], f["evidence"]["calls"]) for f in repeats] == [("Read", 2)]


def test_the_detail_reports_take_the_report_filters(tmp_path: Path) -> None:
    shop = {"workspace.root": "/src/shop_app", "vcs.repository.name": "shop", "vcs.ref.head.name": "main"}
    other = {"gen_ai.agent.type": "codex", "gen_ai.session.id": "s2", "workspace.root": "/src/blog"}
    entries = [*_tool(10, "Read", "d1", **shop), *_tool(20, "Bash", "d2", **other), *_tool(30, "Grep", "d3", **shop)]
    entries[-1]["time_unix_nano"] = entries[-2]["time_unix_nano"] = T0 + 86_400 * 10**9  # a day later
    path = _store(tmp_path, entries)

    def tools(**filters: Any) -> list[str]:
        with closing(connect(path, readonly=True)) as db:
            return sorted(r["tool"] for r in build_tools(db, Filters(**filters))["rows"])

    assert tools() == ["Bash", "Grep", "Read"]
    assert tools(agents=("codex",)) == ["Bash"]
    assert tools(project="shop_app") == ["Grep", "Read"] == tools(repo="shop") == tools(branch="main")
    assert tools(project="shop%") == [], "a LIKE wildcard matches only itself"
    assert tools(since_ns=T0 + 3600 * 10**9) == ["Grep"]
    assert tools(until_ns=T0 + 3600 * 10**9) == ["Bash", "Read"]


def test_a_result_size_sqlite_cannot_hold_is_no_size(tmp_path: Path) -> None:
    rows = _tool(10, "Read", "d1", size=1 << 63)
    path = _store(tmp_path, rows)
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT COUNT(*), MAX(result_bytes) FROM events").fetchone() == (2, None)
