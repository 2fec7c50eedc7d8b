"""The hostile-input sweep (issue 34), generated from every definition in agents.d: one mutation at a time
of one field or column of one record of a real fixture home to another type (tests/support/sweep.py),
then the real `collect --once`, twice. Each case asserts what it can break: no crash (both runs exit 0,
nothing raised); no stall (the second run, over unchanged input, reads nothing again: every source moved
past the mutated record); no entry twice; no neighbour lost (every entry of the other records, present
with and without the mutated record, delivered); nothing uncounted (when entries of the mutated record
are lost because its value now has another type -- not null, which JSON writers use for "absent"; not
another value of the same type, which is a record of another kind, e.g. an event type the parser does not
read -- `status` names a cause: quarantine, a counted unreadable part or a source's count). A definition
with a source of a kind the sweep does not know, or with no fixture home for a source, fails (an ``otlp``
source with no recorded spool gets one line as the receiver writes it, from its ``service_names``).

Bounded for CI: ``SWEEP_CASES`` cases per definition (default 24), drawn with a fixed seed
(``SWEEP_SEED``, default 34); ``SWEEP=all`` runs the whole matrix (every field of every record x every
value; hours). A summary line per definition is printed (``-s`` shows it) and listed in docs/robustness.md.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.sweep import (
    VALUES,
    Case,
    apply,
    built_otlp_case,
    case_paths,
    every_case,
    fixture_for,
    prepare,
    remove,
    sample,
    targets,
)

from collector.cli.main import main
from collector.definitions import AgentDefinition, load_definitions

DEFINITIONS = load_definitions().agents
BUILTIN = Path(__file__).parents[2] / "agents.d"
# entries the collector makes of a session as a whole (status, idle end, turn marks): not any one record's
DERIVED = {"session.status", "session.end", "session.idle", "turn.end"}
CAUSES_IN_SOURCES = ("malformed", "oversized", "refused_files", "errors", "text_not_utf8", "corrupt_rows",
                     "payload_invalid", "dropped", "otel_lines_without_records", "otel_parts_not_objects")
SEED = int(os.environ.get("SWEEP_SEED", "34"))
PER_DEFINITION = int(os.environ.get("SWEEP_CASES", "24"))
# what a case can break, in the summary line's order
PROMISES = ("crash", "stall", "twice", "neighbours lost", "uncounted")


def _collect(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict[str, Any]]:
    paths = case_paths(root)
    monkeypatch.setenv("AGENT_COLLECTOR_DATA_DIR", str(paths.data_dir))
    monkeypatch.setenv("AGENT_COLLECTOR_CONFIG_DIR", str(paths.config_dir))
    monkeypatch.setenv("HOME", str(paths.home))
    rc = main(["collect", "--once", "--home", str(paths.home), "-q"])
    status = json.loads((paths.state_dir / "status.json").read_text())
    return rc, status


def _entries(root: Path) -> list[dict[str, Any]]:
    out = []
    for file in sorted((root / "output").glob("activity-*.jsonl")):
        out += [json.loads(line) for line in file.read_bytes().splitlines() if line.strip()]
    return out


def _ids(entries: list[dict[str, Any]]) -> set[str]:
    return {e["event.id"] for e in entries if e["event.name"] not in DERIVED}


def _names(entries: list[dict[str, Any]]) -> Counter[str]:
    return Counter(e["event.name"] for e in entries if e["event.name"] not in DERIVED)


def _causes(status: dict[str, Any], entries: list[dict[str, Any]]) -> list[str]:
    found = []
    if (status.get("quarantine") or {}).get("records"):
        found.append("quarantine")
    pipeline = status.get("pipeline") or {}
    found += [k for k in ("unreadable", "truncated", "times_replaced") if pipeline.get(k)]
    if pipeline.get("parse_errors"):
        found.append("parse_errors")
    for name, source in (status.get("sources") or {}).items():
        found += [f"{name}.{k}" for k in CAUSES_IN_SOURCES if isinstance(source.get(k), int) and source[k] > 0]
    if any(k in e for e in entries for k in ("collector.invalid_fields", "collector.time_replaced",
                                              "collector.truncated")):
        found.append("entry flags")
    return found


def _quarantined(status: dict[str, Any]) -> int:
    return int((status.get("quarantine") or {}).get("records") or 0)  # the quarantine file's, all runs'


def _read_again(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """The second run over unchanged input read something again: a source did not move past a record."""
    if (second.get("pipeline") or {}).get("records") or _quarantined(second) > _quarantined(first):
        return True
    return any(isinstance(s.get("records"), int) and s["records"] > 0 for s in (second.get("sources") or {}).values())


def _check(case: Case, fixture: Path, tmp: Path, full: list[dict[str, Any]],
           monkeypatch: pytest.MonkeyPatch, outcomes: Counter[str]) -> tuple[str, str] | None:
    """None when the case holds, else (which promise broke, what happened); ``outcomes`` counts what each
    case came to. The promises: no crash (both runs exit 0, nothing raised), no stall (the second run reads
    nothing again), no entry twice, no neighbour lost, no loss of a wrong-typed record without a cause."""
    without = prepare(fixture, tmp / "without")
    remove(case.target, without)
    _collect(without, monkeypatch)
    neighbours = _ids(full) & _ids(_entries(without))
    root = prepare(fixture, tmp / "mutated")
    try:
        apply(case, root)
    except sqlite3.DatabaseError:  # the agent's schema refuses it (a CHECK, json_valid): it cannot occur
        outcomes["refused by the agent's schema"] += 1
        return None
    causes: list[str] = []
    statuses: list[dict[str, Any]] = []
    for run in (1, 2):
        try:
            rc, status = _collect(root, monkeypatch)
        except Exception as exc:  # noqa: BLE001 - any exception out of the command is the finding
            return "crash", f"run {run} raised {type(exc).__name__}: {str(exc)[:200]}"
        if rc != 0:
            return "crash", f"run {run} exited {rc}"
        statuses.append(status)
        if run == 2 and _read_again(*statuses):
            return "stall", f"the second run read again: {json.dumps(status.get('pipeline'))[:300]}"
        causes += _causes(status, [])  # each run counts what it met (a second run meets nothing new)
    entries = _entries(root)
    # a correction (docs/merge.md: the same event.id with collector.correction) is a later entry by design
    counted = Counter((e["event.id"], e.get("collector.correction")) for e in entries)
    twice = sorted(i for (i, _), n in counted.items() if n > 1)
    if twice:
        return "twice", f"{len(twice)} entries twice, e.g. {twice[0]}"
    missing = neighbours - {i for i, _ in counted}
    if missing:
        return "neighbours lost", f"{len(missing)} neighbour entries lost, e.g. {sorted(missing)[0]}"
    lost = _names(full) - _names(entries)
    if lost and case.wrong_type and not causes + _causes({}, entries):
        return "uncounted", f"entries of the mutated record lost with no cause in status: {dict(lost)}"
    outcomes["its entries intact" if not lost else "its entries lost, cause in status" if case.wrong_type
             else "a record of another kind (same type), its entries not read"] += 1
    return None


SWEPT_KINDS = ("spool", "jsonl", "otlp", "otlp_file", "json_file", "sqlite")  # any other kind fails the sweep


def _sweep(defn: AgentDefinition, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[str]]:
    """The sweep of one definition: its summary line and what failed. A definition the sweep cannot cover
    (a source of a kind it does not know, a source with no fixture file) fails an assertion."""
    started = time.monotonic()
    failures: list[str] = []
    broken: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    fields: set[tuple[Any, ...]] = set()
    run = 0
    unknown = sorted({s["kind"] for s in defn.sources} - set(SWEPT_KINDS))
    assert not unknown, f"{defn.id}: sources of a kind the sweep does not know: {unknown}"
    sources = list(defn.sources)
    assert sources, f"{defn.id}: no source"
    for source in sources:
        fixture = fixture_for(defn, source) or built_otlp_case(defn, source, tmp_path / "built")
        assert fixture is not None, (f"{defn.id}: no fixture home has a file for its source {source['name']!r}: "
                                     f"a definition without one fails the sweep")
        fresh = prepare(fixture, tmp_path / "fresh")  # what the sources find (a run consumes the spool)
        found = targets(defn, source, case_paths(fresh), fresh)
        base = prepare(fixture, tmp_path / "base")
        _collect(base, monkeypatch)
        full = _entries(base)
        assert found, f"{defn.id}: source {source['name']!r} reads nothing in {fixture}"
        fields |= {(source["name"], t.table, t.column, tuple(str(p) for p in t.path)) for t in found}
        share = max(1, PER_DEFINITION // len(sources))
        cases = every_case(found) if os.environ.get("SWEEP") == "all" else sample(found, share, SEED + run)
        for case in cases:
            run += 1
            problem = _check(case, fixture, tmp_path / f"case{run}", full, monkeypatch, outcomes)
            if problem:
                broken[problem[0]] += 1
                failures.append(f"{case.describe()}: {problem[0]}: {problem[1]}")
    took = time.monotonic() - started
    held = ", ".join(f"{k} {n}" for k, n in sorted(outcomes.items()))
    summary = (f"sweep {defn.id}: {run} cases over {len(sources)} sources ({len(fields)} fields), {len(VALUES)} "
               f"kinds of value, seed {SEED}: " + ", ".join(f"{k} {broken[k]}" for k in PROMISES) +
               f"; {took:.1f} s; {held}")
    return summary, failures


@pytest.mark.parametrize("agent", sorted(p.stem for p in BUILTIN.glob("*.json")))
def test_sweep(agent: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file of agents.d, by its name: one that does not load is not left out but fails here."""
    assert agent in DEFINITIONS, f"agents.d/{agent}.json did not load as a definition of that id"
    summary, failures = _sweep(DEFINITIONS[agent], tmp_path, monkeypatch)
    print("\n" + summary)
    assert not failures, "\n".join(failures)


def _new_agent(sources: list[dict[str, Any]]) -> AgentDefinition:
    raw = {**DEFINITIONS["kimi"].raw, "id": "sweep-no-such-agent", "sources": sources}
    return AgentDefinition("sweep-no-such-agent", raw, ())


def test_a_definition_without_a_fixture_home_fails_the_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AssertionError, match="no fixture home has a file for its source 'hooks'"):
        _sweep(_new_agent([{"kind": "spool", "name": "hooks"}]), tmp_path, monkeypatch)


def test_a_source_of_a_kind_the_sweep_does_not_know_fails_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    command = {"kind": "command", "name": "usage", "argv": ["true"]}
    with pytest.raises(AssertionError, match=r"a kind the sweep does not know: \['command'\]"):
        _sweep(_new_agent([{"kind": "spool", "name": "hooks"}, command]), tmp_path, monkeypatch)
