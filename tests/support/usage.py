"""Shared by the usage store, report and dashboard tests: a fixture collected into a usage store, and
the model server's own records of the calls (the truth the store is checked against)."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from collector.paths import Paths
from collector.usage.query import Filters
from collector.usage.report import ReportRequest, build_report
from collector.usage.store import connect
from support import FIXTURES, collect, prepare_fixture, usage_tuple

AGENTS = ("claude-code", "codex", "gemini-cli", "qwen-code", "opencode")
REAL_CASES = sorted(p.parent for a in AGENTS for p in (FIXTURES / a).glob("*/response_usage.jsonl")
                    if p.read_text().strip() and "legacy" not in p.parent.name)


def collected(case: Path, tmp: Path) -> Paths:
    paths = prepare_fixture(case, tmp)
    collect(paths)
    return paths


def store_db(paths: Paths) -> sqlite3.Connection:
    return connect(paths.data_dir / "usage.sqlite", readonly=True)


def report(paths: Paths, kind: str, **filters: Any) -> dict[str, Any]:
    db = store_db(paths)
    try:
        return build_report(db, ReportRequest(kind, Filters(**filters), ZoneInfo("UTC"), "UTC"))
    finally:
        db.close()


def served(case: Path) -> list[dict[str, Any]]:
    """The model server's usage records of the case."""
    lines = [json.loads(x) for x in (case / "response_usage.jsonl").read_text().splitlines() if x.strip()]
    return [d for d in lines if d.get("kind") == "response_usage"]


def recorded(case: Path, entries_tuples: Counter[tuple[int, int, int, int]]) -> list[dict[str, Any]]:
    """The served records the agent kept a trace of (all of them, unless expected.json names some missing)."""
    left = Counter(entries_tuples)
    out = []
    for record in served(case):
        key = usage_tuple(record["api"], record["usage"])
        if left[key] > 0:
            left[key] -= 1
            out.append(record)
    return out


def merged_fixtures(tmp: Path) -> Paths:
    """Real sessions of all five agents in one home and one spool (every case whose files do not clash
    with another's: one OpenCode database per home), for a daemon to collect."""
    import shutil

    from support import make_paths

    home = tmp / "home"
    home.mkdir(parents=True)
    paths = make_paths(tmp, home)
    for case in REAL_CASES:
        files = [p for p in (case / "home").rglob("*") if p.is_file()] if (case / "home").exists() else []
        if any((home / p.relative_to(case / "home")).exists() for p in files):
            continue
        for p in files:
            target = home / p.relative_to(case / "home")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, target)
        for p in sorted((case / "spool").rglob("*.jsonl")) if (case / "spool").exists() else []:
            target = paths.spool_dir / p.parent.name / f"{p.stem}.{case.name}.jsonl"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, target)
    return paths
