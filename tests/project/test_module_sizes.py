"""Modules of a few hundred lines: no module of `collector/` is over 500 lines (issue 24), so that each
has one job a reader can hold in mind; a module that grows past it is split by what its parts do."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "collector"
LIMIT = 500


def test_no_module_is_over_500_lines() -> None:
    sizes = {str(p.relative_to(ROOT.parent)): len(p.read_text().splitlines()) for p in ROOT.rglob("*.py")}
    assert len(sizes) > 150, "the package is where the test looks"
    assert {name: n for name, n in sizes.items() if n > LIMIT} == {}
