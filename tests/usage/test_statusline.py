"""The status line's text from Claude Code's status-line payload (tests/fixtures/statusline/claude-code,
its README cites the documented fields) and a spend.json as the daemon writes it."""

from __future__ import annotations

import json
from typing import Any

from support import FIXTURES

from collector.usage.statusline import line, values

PAYLOAD = json.loads((FIXTURES / "statusline" / "claude-code" / "payload.json").read_text())
NOW = 1_800_000_000.0


def spend(**over: Any) -> dict[str, Any]:
    base = {"updated": NOW - 5, "today": {"usd": 3.104, "tokens": 1000}, "sessions": {
        f"claude-code {PAYLOAD['session_id']}": 0.39},
        "block": {"start_unix": NOW - 3600, "end_unix": NOW + 2 * 3600 + 13 * 60 + 20, "usd": 2.05},
        "budgets": [{"name": "daily", "level": "warn", "fraction": 0.81}, {"name": "week", "level": "ok",
                                                                          "fraction": 0.3}]}
    return {**base, **over}


def test_the_line_from_a_claude_code_payload() -> None:
    want = "$0.42 session | $3.10 today | block 2h13m left ($2.05) | budget daily 81%"
    assert line(PAYLOAD, spend(), now=NOW) == want


def test_our_session_cost_when_the_payload_has_none_and_the_worst_budget_wins() -> None:
    payload = {k: v for k, v in PAYLOAD.items() if k != "cost"}
    budgets = [{"name": "daily", "level": "warn", "fraction": 0.95}, {"name": "block", "level": "over",
                                                                      "fraction": 1.02}]
    assert line(payload, spend(budgets=budgets, block=None), now=NOW) == (
        "$0.39 session | $3.10 today | no block | OVER block 102%")


def test_format_fields_and_a_stale_cache() -> None:
    got = line(PAYLOAD, spend(updated=NOW - 3600, budgets=[]), "{model} {session} / {today} | {budget} | {cwd}",
               now=NOW)
    assert got.startswith("Sonnet 4.5 $0.42 / $3.10 | /home/user/src/shop (as of ")  # empty {budget} dropped
    assert values(PAYLOAD, spend(), NOW)["session_usd"] == 0.4213


def test_no_cache_and_a_hostile_payload() -> None:
    assert line(PAYLOAD, None) == "agent-collector: no data yet"
    hostile = {"cost": {"total_cost_usd": "lots"}, "session_id": 7, "model": [1], "workspace": "x"}
    assert line(hostile, spend(sessions="no", block={"end_unix": "soon"}, budgets=[{"level": "bad"}]),
                now=NOW) == "$? session | $3.10 today | no block"
