"""The doctor's budget check and the status line of `status`, from status.json's ``budget``."""

from __future__ import annotations

from collector.cli.status_cmd import _print_budget
from collector.doctor.budgets import check_budget
from collector.doctor.model import Level

OVER_HARD = {"name": "daily", "level": "over", "fraction": 1.04, "hard": True}
WARN = {"name": "week", "level": "warn", "fraction": 0.85, "hard": False}


def test_levels_follow_the_worst_limit() -> None:
    assert check_budget({}).level is Level.OK
    assert check_budget({"budget": {"limits": 2, "crossed": []}}).message == "2 limits, none reached"
    warned = check_budget({"budget": {"limits": 2, "crossed": [WARN]}})
    assert (warned.level, warned.message) == (Level.WARN, "limits reached: week warn (85%)")
    refused = check_budget({"budget": {"limits": 2, "crossed": [WARN, OVER_HARD]}})
    assert refused.level is Level.ERROR and "prompts are refused: week warn (85%), daily over (104%)" in refused.message


def test_status_prints_the_mark(capsys) -> None:
    _print_budget({"limits": 0})
    _print_budget({"limits": 2, "crossed": [OVER_HARD, WARN]})
    assert capsys.readouterr().out == "budget: 2 limits; OVER daily 104% (hard: prompts refused), warn week 85%\n"
