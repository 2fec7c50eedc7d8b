"""The dedupe step: an id already delivered (among the last RECENT in memory, else in the store) is dropped,
within a batch too; a forgotten id (its record was quarantined) is taken again."""

from __future__ import annotations

import random
from typing import Any

import pytest

from collector.pipeline import dedupe
from collector.pipeline.dedupe import Deduper


class _Reference:
    """The rule written plainly: a list of the last ``recent`` remembered ids, then the store."""

    def __init__(self, recent: int, stored: set[str]) -> None:
        self.recent, self.stored, self.order, self.dropped = recent, stored, [], 0

    def fresh(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for entry in entries:
            if entry["event.id"] in self.order or entry["event.id"] in self.stored:
                self.dropped += 1
                continue
            self.order = [*self.order, entry["event.id"]][-self.recent :]
            out.append(entry)
        return out

    def forget(self, ids: list[str]) -> None:
        self.order = [i for i in self.order if i not in ids]


def test_the_deduper_follows_the_rule_over_random_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dedupe, "RECENT", 50)
    rng = random.Random(16)
    ids = [f"{i:032x}" for i in range(400)]
    stored = set(rng.sample(ids, 40))
    asked: list[set[str]] = []

    def seen_in_store(query: Any) -> set[str]:
        asked.append(set(query))
        return {i for i in query if i in stored}

    deduper, reference = Deduper(seen_in_store), _Reference(50, stored)
    fast = 0
    for step in range(600):
        if rng.random() < 0.1:
            gone = rng.sample(ids, 4)
            deduper.forget(gone)
            reference.forget(gone)
            continue
        pool = ids if rng.random() < 0.7 else [f"new-{step}-{i}" for i in range(30)]  # a backfill's batch
        batch = [{"event.id": rng.choice(pool)} for _ in range(rng.randint(0, 30))]
        if pool is not ids:
            batch = [dict(e) for e in {e["event.id"]: e for e in batch}.values()]
            fast += 1
        got = deduper.fresh(batch)
        assert got == reference.fresh(batch)
        assert all(any(g is e for e in batch) for g in got), "the entries themselves, not copies"
    assert deduper.dropped == reference.dropped > 100 and fast > 50
    assert all(len(q) <= 30 for q in asked), "only the batch's ids not in memory are asked for"


def test_a_batch_of_new_ids_is_taken_whole_and_then_known() -> None:
    deduper = Deduper(lambda ids: set())
    batch = [{"event.id": f"e{i}"} for i in range(5)]
    assert deduper.fresh(batch) == batch
    assert deduper.fresh([dict(e) for e in batch]) == [] and deduper.dropped == 5
    deduper.forget(["e2"])
    assert deduper.fresh([{"event.id": "e2"}, {"event.id": "e2"}]) == [{"event.id": "e2"}]
    assert deduper.dropped == 6
