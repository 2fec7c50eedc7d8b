"""An exporter that fails on one entry of a batch (an unexpected exception, not an ExportError): the entry is
found by bisection and quarantined for that exporter with the reason; every other entry is delivered to every
exporter exactly once; an environment error (a full disk) quarantines nothing; a process that dies in an
exporter on an entry does not die on it again (the crash guard names the batch, then the entry)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from collector.daemon.delivery import Delivery
from collector.exporters.base import Entry, ExportError
from collector.exporters.narrowing import MAX_POISON
from collector.model.raw import RawRecord
from collector.pipeline.crash_guard import CrashGuard, read_verdict
from collector.pipeline.quarantine import Quarantine, listing
from collector.state.checkpoints import CheckpointStore, Commit

N = 2000


def batch(n: int = N) -> list[Entry]:
    return [{"event.id": f"id-{i:05d}", "event.name": "tool.call", "gen_ai.agent.type": "claude-code",
             "n": i} for i in range(n)]


class Fake:
    """Accepts a batch whole, or fails on it before taking any of it (as the JSONL file and the store do)."""

    def __init__(self, name: str, poison: set[int] | None = None, error: type[Exception] = TypeError) -> None:
        self.name = name
        self.poison = poison or set()
        self.error = error
        self.taken: Counter[str] = Counter()
        self.calls = 0

    def export(self, entries: Sequence[Entry]) -> None:
        self.calls += 1
        for entry in entries:
            if entry["n"] in self.poison:
                raise self.error(f"cannot take {entry['n']}")
        self.taken.update(e["event.id"] for e in entries)

    def shutdown(self) -> None:
        pass

    def stats(self) -> dict[str, Any]:
        return {}


class Sink:
    def __init__(self) -> None:
        self.got: list[tuple[str, Any, str, str]] = []

    def __call__(self, entry: Entry, origin: Any, exporter: str, reason: str) -> None:
        self.got.append((entry["event.id"], origin, exporter, reason))


def ids(entries: list[Entry]) -> list[str]:
    return [e["event.id"] for e in entries]


def test_one_bad_entry_of_2000_is_found_in_log_n_exports_and_the_rest_is_delivered_once(tmp_path: Path) -> None:
    first, failing, last = Fake("first"), Fake("failing", {1234}), Fake("last")
    sink = Sink()
    store = CheckpointStore(tmp_path / "c.sqlite")
    delivery = Delivery([first, failing, last], store, poison=sink)
    entries = batch()
    records = [RawRecord("claude-code", "transcript", {}, "stream", str(i * 10), 0, {"path": "/t.jsonl"})
               for i in range(N // 10)]
    origins = [(i * 10, r) for i, r in enumerate(records)]  # ten entries per record

    assert delivery.deliver(entries, Commit(positions={"stream": {"offset": 99}}), origins)

    everyone = Counter(ids(entries))
    assert first.taken == everyone and last.taken == everyone, "the other exporters take every entry once"
    assert failing.taken == everyone - Counter(["id-01234"]), "every neighbour exactly once, the bad one never"
    assert failing.calls <= 2 * math.ceil(math.log2(N)) + 1, failing.calls
    [(eid, origin, exporter, reason)] = sink.got
    assert (eid, exporter, reason) == ("id-01234", "failing", "failing: TypeError")
    assert origin is records[123], "the record the entry came from, for its source position"
    assert store.positions()["stream"] == {"offset": 99}, "the batch is committed"
    assert delivery.status()["poisoned"] == {"failing": 1} and delivery.held is None


def test_several_bad_entries_each_quarantined_neighbours_once(tmp_path: Path) -> None:
    failing = Fake("failing", {0, 1, 777, 1999})
    sink = Sink()
    delivery = Delivery([failing], CheckpointStore(tmp_path / "c.sqlite"), poison=sink)
    entries = batch()
    assert delivery.deliver(entries, Commit())
    assert sorted(s[0] for s in sink.got) == ["id-00000", "id-00001", "id-00777", "id-01999"]
    assert failing.taken == Counter(ids(entries)) - Counter(s[0] for s in sink.got)
    assert max(failing.taken.values()) == 1


def test_a_full_disk_is_not_poison_the_batch_is_held_and_delivered_later(tmp_path: Path) -> None:
    """OSError (ENOSPC, EACCES) raised as is by an exporter: nothing is quarantined, the batch waits."""
    disk = Fake("disk", {5}, error=OSError)
    sink = Sink()
    store = CheckpointStore(tmp_path / "c.sqlite")
    delivery = Delivery([disk], store, poison=sink)
    assert not delivery.deliver(batch(), Commit(positions={"s": {"offset": 1}}))
    assert delivery.status()["state"] == "blocked" and "OSError" in delivery.status()["blocked"]["error"]
    assert not sink.got and "s" not in store.positions()
    disk.poison = set()  # space is back
    assert delivery.retry()
    assert disk.taken == Counter(ids(batch())) and not sink.got
    assert store.positions()["s"] == {"offset": 1}


def test_a_retryable_refusal_while_narrowing_holds_only_what_was_not_taken(tmp_path: Path) -> None:
    class Flaky(Fake):
        def export(self, entries: Sequence[Entry]) -> None:
            if self.calls == 3:  # the disk fills up in the middle of the search
                self.calls += 1
                raise ExportError("disk full")
            super().export(entries)

    flaky = Flaky("flaky", {1500})
    sink = Sink()
    delivery = Delivery([flaky], CheckpointStore(tmp_path / "c.sqlite"), poison=sink)
    assert not delivery.deliver(batch(), Commit())
    assert delivery.retry()
    assert [s[0] for s in sink.got] == ["id-01500"]
    assert flaky.taken == Counter(ids(batch())) - Counter(["id-01500"])


def test_an_exporter_that_fails_on_everything_is_broken_not_the_data(tmp_path: Path) -> None:
    broken = Fake("broken", set(range(N)))
    sink = Sink()
    delivery = Delivery([broken, Fake("other")], CheckpointStore(tmp_path / "c.sqlite"), poison=sink)
    assert delivery.deliver(batch(), Commit())
    assert len(sink.got) == MAX_POISON, "a bounded number quarantined, not the whole batch"
    assert delivery.status()["rejected"] == {"broken": N - MAX_POISON}


def test_quarantined_export_entries_keep_source_reason_and_the_entry_and_are_retried(tmp_path: Path) -> None:
    quarantine = Quarantine(tmp_path / "q")
    record = RawRecord("claude-code", "transcript", {"secret": "x"}, "fp", "4096", 1, {"path": "/p/s.jsonl"})
    entry = batch(1)[0]
    quarantine.add_entry(entry, record, "usage_store", "usage_store: TypeError")
    [line] = listing(tmp_path / "q")
    assert (line["stage"], line["reason"], line["exporter"]) == ("export", "usage_store: TypeError", "usage_store")
    assert (line["path"], line["position"], line["entry"]) == ("/p/s.jsonl", "4096", entry)
    assert "data" not in line, "the record's data is not kept (capture off); the finished entry is"
    assert quarantine.stats()["by_source"] == {"claude-code:transcript": {"export: usage_store: TypeError": 1}}

    from collector.pipeline.quarantine import request_retry

    assert request_retry(tmp_path / "q", None) == 1
    due = quarantine.due()
    assert due.records == [] and [(d.exporter, d.entry) for d in due.entries] == [("usage_store", entry)]
    quarantine.add_entry(entry, due.entries[0].origin, "usage_store", "usage_store: TypeError")
    [again] = listing(tmp_path / "q")
    assert (again["attempts"], again["path"], again["position"]) == (2, "/p/s.jsonl", "4096")


class Died(BaseException):
    """The process dying inside an exporter (nothing catches it; the crash guard's name stays)."""


def test_a_death_in_an_exporter_names_the_batch_then_the_entry_then_quarantines_it(tmp_path: Path) -> None:
    class Deadly(Fake):
        def export(self, entries: Sequence[Entry]) -> None:
            if any(e["n"] == 42 for e in entries):
                raise Died
            super().export(entries)

    state = tmp_path / "state"
    state.mkdir()
    for death in range(3):  # the batch, then the entry alone twice (two kills cost nothing)
        guard = CrashGuard(state, env={})
        delivery = Delivery([Fake("before"), Deadly("deadly")], CheckpointStore(tmp_path / "c.sqlite"),
                            guard=guard)
        with pytest.raises(Died):
            delivery.deliver(batch(100), Commit())
        guard.close()
        key = read_verdict(state).key
        assert key is not None and (b"export" in key if death == 0 else key.endswith(b"id-00042")), key
    guard = CrashGuard(state, env={})
    deadly, sink = Deadly("deadly"), Sink()
    delivery = Delivery([deadly], CheckpointStore(tmp_path / "c.sqlite"), poison=sink, guard=guard)
    assert delivery.deliver(batch(100), Commit())
    assert [(s[0], s[3]) for s in sink.got] == [("id-00042", "deadly: the collector died while exporting it")]
    assert deadly.taken == Counter(ids(batch(100))) - Counter(["id-00042"])
    guard.close()
    assert read_verdict(state).key is None, "a delivered batch leaves no name"


def test_one_kill_in_an_exporter_costs_no_entry(tmp_path: Path) -> None:
    """A death while the exporter took the batch is not the entries' fault: next time the batch goes one
    entry at a time, and if nothing dies, nothing is quarantined."""
    state = tmp_path / "state"
    state.mkdir()
    guard = CrashGuard(state, env={})
    guard.exporting("jsonl", batch(10))  # and the process is killed here
    guard.close()
    guard = CrashGuard(state, env={})
    fine, sink = Fake("jsonl"), Sink()
    assert Delivery([fine], CheckpointStore(tmp_path / "c.sqlite"), poison=sink, guard=guard).deliver(batch(10),
                                                                                                     Commit())
    assert fine.calls == 10, "one entry at a time"
    assert fine.taken == Counter(ids(batch(10))) and not sink.got


def store_entries(n: int) -> list[Entry]:
    return [{"event.id": f"{i:032x}", "event.name": "llm.response", "time_unix_nano": 1_796_040_000_000_000_000 + i,
             "gen_ai.agent.type": "claude-code", "gen_ai.session.id": "s1", "gen_ai.usage.input_tokens": i}
            for i in range(n)]


def test_the_usage_store_raises_what_an_entry_causes_and_refuses_for_later_what_the_disk_causes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real SQLite usage store: an entry SQLite cannot bind (past the boundary, given directly) is
    found and quarantined, the other 498 are stored once; "database or disk is full" holds the batch."""
    import sqlite3

    from collector.exporters.usage import UsageStoreExporter

    usage = UsageStoreExporter(tmp_path / "usage.sqlite", 0)
    entries = store_entries(500)
    entries[321]["http.response.status_code"] = 2**63  # no SQLite INTEGER holds it
    entries[100]["gen_ai.agent.type"] = ("claude-code",)  # no SQLite type: sqlite3.ProgrammingError
    sink = Sink()
    delivery = Delivery([usage], CheckpointStore(tmp_path / "c.sqlite"), poison=sink)
    assert delivery.deliver(entries, Commit())
    reasons = dict((s[0], s[3]) for s in sink.got)
    assert sorted(reasons) == [f"{100:032x}", f"{321:032x}"] and reasons[f"{321:032x}"] == "usage_store: OverflowError"
    assert reasons[f"{100:032x}"] == "usage_store: ProgrammingError", "raised as is, not held as a full disk"
    db = sqlite3.connect(tmp_path / "usage.sqlite")
    stored = [r[0] for r in db.execute("SELECT event_id FROM events ORDER BY event_id")]
    db.close()
    assert stored == sorted(e["event.id"] for i, e in enumerate(entries) if i not in (100, 321)), "the rest, once"

    def full(batch: Any) -> int:
        raise sqlite3.OperationalError("database or disk is full")

    assert usage._store is not None
    monkeypatch.setattr(usage._store, "add", full)
    assert not delivery.deliver(store_entries(3), Commit())
    assert "database or disk is full" in delivery.status()["blocked"]["error"] and len(sink.got) == 2
    usage.shutdown()
