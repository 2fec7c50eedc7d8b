"""Each entry is encoded once: the pipeline's encode check keeps its JSON, the delivery hands it to the JSON
lines exporter with the batch, which writes those bytes; any other batch (a part of one, entries the collector
made itself) is encoded by the exporter as before. The output is the same either way."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from collector.daemon.delivery import Delivery
from collector.exporters.base import Entry
from collector.exporters.jsonl import JsonlExporter
from collector.state.checkpoints import CheckpointStore, Commit


def batch(n: int) -> list[Entry]:
    return [{"event.id": f"id-{i:04d}", "event.name": "tool.call", "gen_ai.agent.type": "codex", "n": i,
             "text": "é\u2028\"q\"\n"} for i in range(n)]


def written(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.glob("activity-*.jsonl")))


def test_the_jsonl_exporter_writes_the_given_json_as_it_would_write_the_entries(tmp_path: Path) -> None:
    entries = batch(50)
    plain, given = JsonlExporter(tmp_path / "plain"), JsonlExporter(tmp_path / "given")
    plain.export(entries)
    given.export_lines(entries, [orjson.dumps(e) for e in entries])
    given.export_lines(entries[:10], [orjson.dumps(e) for e in entries[:10]])  # already written: skipped
    assert written(tmp_path / "given") == written(tmp_path / "plain") != b""
    assert given.skipped_duplicates == 10 and given.written == plain.written == 50


class Recorder:
    """An exporter that takes the JSON when it is given (as the JSON lines file does) and says how it came."""

    name = "recorder"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def export(self, entries: Sequence[Entry]) -> None:
        self.calls.append(("entries", [e["event.id"] for e in entries]))

    def export_lines(self, entries: Sequence[Entry], lines: Sequence[bytes]) -> None:
        assert [orjson.loads(line) for line in lines] == list(entries)
        self.calls.append(("lines", [e["event.id"] for e in entries]))

    def shutdown(self) -> None:
        pass

    def stats(self) -> dict[str, Any]:
        return {}


def test_the_delivery_hands_the_json_with_the_whole_batch_only(tmp_path: Path) -> None:
    recorder = Recorder()
    delivery = Delivery([recorder], CheckpointStore(tmp_path / "c.sqlite"))
    entries = batch(4)
    assert delivery.deliver(entries, Commit(), lines=[orjson.dumps(e) for e in entries])
    assert delivery.deliver(entries[:2], Commit())  # no JSON known: the exporter encodes
    assert delivery.deliver_to([(recorder, entries[1:3])], entries, Commit(), lines=[orjson.dumps(e) for e in entries])
    assert recorder.calls == [("lines", ["id-0000", "id-0001", "id-0002", "id-0003"]),
                              ("entries", ["id-0000", "id-0001"]), ("entries", ["id-0001", "id-0002"])]
