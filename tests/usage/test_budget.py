"""Budgets against a real usage store: what each period counts, the levels, the 5-hour block, sessions;
prices from [prices] (1 USD per million input tokens, 2 per million output) so every cost is hand-computed."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from support.budget import call

from collector.usage.budget import Limit, current_block, evaluate, settings, spend_summary, window_start
from collector.usage.prices import PriceTable
from collector.usage.store import UsageStore, connect

UTC = ZoneInfo("UTC")
PRICES = {"m-test": {"input": 1.0, "output": 2.0}}
NOW = datetime(2026, 12, 4, 15, 30, tzinfo=UTC).timestamp()  # a Friday


def store(tmp: Path, entries: list[dict[str, Any]]) -> Path:
    path = tmp / "usage.sqlite"
    db = UsageStore(path)
    db.add(entries)
    db.close()
    return path


def states(path: Path, *limits: Limit) -> dict[str, Any]:
    db = connect(path, readonly=True)
    try:
        return {(s.limit.name, s.session): s for s in evaluate(db, limits, NOW, UTC, PriceTable(None, PRICES))}
    finally:
        db.close()


def test_periods_count_their_window_and_scope(tmp_path: Path) -> None:
    day = 86400
    path = store(tmp_path, [
        call(1, NOW - 60, 1_000_000, 0),                    # today: $1.00
        call(2, NOW - 120, 0, 500_000, agent="codex"),      # today, codex: $1.00
        call(3, NOW - 2 * day, 2_000_000, 0),               # Wednesday, same week and month: $2.00
        call(4, NOW - 10 * day, 0, 1_000_000),              # Nov 24: an earlier week and month
    ])
    got = states(path, Limit("d", "day", "usd", 4.0), Limit("dc", "day", "usd", 1.25, agent="claude-code"),
                 Limit("w", "week", "usd", 5.0), Limit("m", "month", "usd", 4.0),
                 Limit("t", "day", "tokens", 1_500_000, warn_at=0.5))
    assert got["d", None].spent == 2.0 and got["d", None].level == "ok"
    assert got["dc", None].spent == 1.0 and got["dc", None].level == "warn"  # 80 % of 1.25
    assert got["w", None].spent == 4.0 and got["w", None].level == "warn"
    assert got["m", None].spent == 4.0 and got["m", None].level == "over"  # November's call is not counted
    assert got["t", None].spent == 1_500_000 and got["t", None].level == "over"


def test_week_and_month_start_where_the_calendar_says(tmp_path: Path) -> None:
    assert window_start("week", NOW, UTC) == int(datetime(2026, 11, 30, tzinfo=UTC).timestamp()) * 10**9  # Monday
    assert window_start("month", NOW, UTC) == int(datetime(2026, 12, 1, tzinfo=UTC).timestamp()) * 10**9
    tokyo = ZoneInfo("Asia/Tokyo")  # 15:30 UTC is 00:30 the next day there
    assert window_start("day", NOW, tokyo) == int(datetime(2026, 12, 5, tzinfo=tokyo).timestamp()) * 10**9


def test_the_block_holds_now_and_counts_from_its_first_hour(tmp_path: Path) -> None:
    path = store(tmp_path, [call(1, NOW - 7 * 3600, 1_000_000, 0),  # 08:30: a block 08:00-13:00
                            call(2, NOW - 2 * 3600, 3_000_000, 0),  # 13:30: the block 13:00-18:00
                            call(3, NOW - 60, 0, 1_000_000)])
    db = connect(path, readonly=True)
    try:
        assert current_block(db, NOW, UTC, PriceTable(None, PRICES)) == (int(NOW - 2.5 * 3600), int(NOW + 2.5 * 3600))
        summary = spend_summary(db, NOW, UTC, PriceTable(None, PRICES))
    finally:
        db.close()
    assert summary["block"]["usd"] == 5.0 and summary["today"]["usd"] == 6.0
    assert summary["sessions"] == {"claude-code s1": 6.0}
    assert states(path, Limit("b", "block", "usd", 5.0))["b", None].level == "over"


def test_session_budgets_give_one_state_per_recent_session(tmp_path: Path) -> None:
    path = store(tmp_path, [call(1, NOW - 60, 2_000_000, 0, session="a"), call(2, NOW - 30, 100_000, 0, session="b"),
                            call(3, NOW - 5 * 3600, 9_000_000, 0, session="old")])
    got = states(path, Limit("s", "session", "usd", 1.0))
    assert set(got) == {("s", "claude-code a"), ("s", "claude-code b")}  # "old" had nothing in the last hour
    assert got["s", "claude-code a"].level == "over" and got["s", "claude-code b"].level == "ok"


def test_settings_read_usd_or_tokens_and_the_shared_warn_share() -> None:
    got = settings({"warn_at": 0.5, "webhook": "http://127.0.0.1:1/x", "limits": [
        {"name": "a", "usd": 3}, {"name": "b", "tokens": 10, "period": "week", "hard": True, "warn_at": 0.9}]})
    assert got.limits == (Limit("a", "day", "usd", 3.0, warn_at=0.5), Limit("b", "week", "tokens", 10.0, hard=True,
                                                                            warn_at=0.9))
    assert got.webhook == "http://127.0.0.1:1/x" and got.notify


def test_an_empty_store_spends_nothing(tmp_path: Path) -> None:
    got = states(store(tmp_path, []), Limit("d", "day", "usd", 1.0), Limit("b", "block", "usd", 1.0))
    assert got["d", None].spent == 0 and ("b", None) not in got  # no block is running
