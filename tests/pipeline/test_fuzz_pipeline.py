"""Property: one hostile value in any field of any real record of any agent never escapes the pipeline.

Every mutant is either collected or quarantined (never an uncaught exception, never a lost or duplicated
neighbour), through the real pipeline and the JSONL and OTLP (protobuf) exporters. The default suite runs
a bounded number of examples; ``AGENT_COLLECTOR_FUZZ_EXAMPLES`` raises it (benchmarks/fuzz_pipeline.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fuzz import HOSTILE, Rig, fixture_cases, mutate, parser_ids, read_case, value_paths

from collector.model.entry import CONTENT_FIELDS
from collector.model.raw import RawRecord

EXAMPLES = int(os.environ.get("AGENT_COLLECTOR_FUZZ_EXAMPLES", "40"))


class Corpus(dict[str, list[RawRecord]]):
    def __repr__(self) -> str:  # Hypothesis prints the arguments of a failing example
        return f"<{sum(map(len, self.values()))} fixture records>"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[RawRecord]]:
    out = Corpus()
    for agent, case in fixture_cases():
        records = read_case(agent, case, tmp_path_factory.mktemp(f"{agent}-{case.name}"))
        assert records, f"{agent}/{case.name}: the fixture gave no record"
        out[f"{agent}/{case.name}"] = records
    assert {key.split("/")[0] for key in out} == {"claude-code", "codex", "gemini-cli", "qwen-code", "opencode"}
    return out


def test_the_corpus_holds_every_kind_of_record(corpus: dict[str, list[RawRecord]]) -> None:
    kinds = {r.kind for records in corpus.values() for r in records}
    assert {"hook", "transcript", "sqlite"} <= kinds


@settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 100,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_one_hostile_field_is_collected_or_quarantined(corpus: dict[str, list[RawRecord]],
                                                       tmp_path_factory: pytest.TempPathFactory,
                                                       data: st.DataObject) -> None:
    records = corpus[data.draw(st.sampled_from(sorted(corpus)), label="case")]
    index = data.draw(st.integers(0, len(records) - 1), label="record")
    path = data.draw(st.sampled_from(value_paths(records[index].data)), label="field")
    value = data.draw(HOSTILE, label="value")
    capture = data.draw(st.booleans(), label="capture")
    batch = [*records[:index], mutate(records[index], path, value), *records[index + 1 :]]
    tmp = tmp_path_factory.mktemp("fuzz")
    rig = Rig(tmp, capture)

    written = rig.run(batch)  # no exception may escape the pipeline or an exporter

    ids = [e["event.id"] for e in written]
    assert len(ids) == len(set(ids)), "an entry was written twice"
    neighbours = set().union(*(parser_ids(r) for i, r in enumerate(records) if i != index))
    assert neighbours <= set(ids), "a neighbour of the mutant was lost"
    assert rig.pipeline.stats.quarantined <= 1
    quarantined = _quarantine_lines(tmp)
    assert len(quarantined) == rig.pipeline.stats.quarantined
    for line in quarantined:
        assert (line["path"], line["position"]) == (batch[index].meta.get("path", ""), batch[index].position)
        assert line["stage"] and line["reason"]
        assert capture or "data" not in line, "content in the quarantine with capture off"
    if not capture:
        assert not [e for e in written if set(CONTENT_FIELDS) & set(e)], "content left with capture off"


def _quarantine_lines(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "quarantine" / "quarantine.jsonl"
    return [orjson.loads(x) for x in path.read_bytes().splitlines()] if path.exists() else []
