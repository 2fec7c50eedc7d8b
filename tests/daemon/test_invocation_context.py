"""Per-invocation context through the real `collect --once`: a real Qwen Code session run by two processes
(the second resumed it; tests/fixtures/qwen-code/two_turns_resume), each started with its own TRACEPARENT
and AGENT_COLLECTOR_ATTRIBUTES, which the hook writes into its spool lines (hooks/agent-collector-hook.sh:
``"attributes"`` and ``"traceparent"`` between the event and the payload). Every entry of each process's
turn, the transcript's too, carries that process's attributes, and with ``collector.upstream_trace_link``
each turn is traced under its own caller's span (the real OTLP receiver decodes what was sent)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, ROOT, make_paths, read_output
from support.collect_once import collect_cli
from support.otlp_receiver import OtlpReceiver

from collector.paths import Paths

CASE = FIXTURES / "qwen-code" / "two_turns_resume"
CALLERS = [("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "run=first,team=a"),
           ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "run=second")]


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver().start()
    yield r
    r.stop()


def prepare(tmp_path: Path, endpoint: str, link: bool, traceparents: list[str]) -> Paths:
    """The case's home and spool, each hook line given the context of the process that wrote it (a new
    process starts at each InstructionsLoaded)."""
    paths = make_paths(tmp_path)
    shutil.copytree(CASE / "home", paths.home, symlinks=True)
    process = -1
    for src in (CASE / "spool").glob("*/*.jsonl"):
        out = []
        for line in src.read_text().splitlines():
            record = json.loads(line)
            process += record["event"] == "InstructionsLoaded"
            _, _, attributes = CALLERS[process]
            record = {**{k: record[k] for k in ("ts", "agent", "event")}, "attributes": attributes,
                      "traceparent": traceparents[process], "payload": record["payload"]}
            out.append(json.dumps(record))
        target = paths.spool_dir / src.parent.name / src.name
        target.parent.mkdir(parents=True)
        target.write_text("\n".join(out) + "\n")
    assert process == 1, "two processes"
    paths.config_dir.mkdir(parents=True)
    paths.config_file.write_text(f'[collector]\nupstream_trace_link = {str(link).lower()}\n'
                                 f'[otlp]\nendpoint = "{endpoint}"\nprotocol = "http/protobuf"\n'
                                 "[ingest]\nenabled = false\n[watchdog]\nenabled = false\n")
    return paths


def collect_env(paths: Paths) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_COLLECTOR_")}
    env.update(HOME=str(paths.home), AGENT_COLLECTOR_DATA_DIR=str(paths.data_dir),
               AGENT_COLLECTOR_CONFIG_DIR=str(paths.config_dir))
    return env


def by_process(entries: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The session's entries from each process: the second one's from its session.start on."""
    starts = sorted(e["time_unix_nano"] for e in entries if e["event.name"] == "session.start")
    assert len(starts) == 2
    mine = [e for e in entries if e.get("gen_ai.session.id")]
    return [[e for e in mine if e["time_unix_nano"] < starts[1]], [e for e in mine if e["time_unix_nano"] >= starts[1]]]


def test_each_process_of_a_resumed_session_stamps_and_links_its_own_turn(tmp_path: Path,
                                                                       receiver: OtlpReceiver) -> None:
    paths = prepare(tmp_path, receiver.endpoint, True, [f"00-{t}-{p}-01" for t, p, _ in CALLERS])
    collect_cli(paths)
    entries = read_output(paths.output_dir)
    first, second = by_process(entries)
    assert {e.get("source.kind") for e in first + second} >= {"hook", "transcript"}
    for turn, (trace_id, parent_id, attributes) in zip((first, second), CALLERS, strict=True):
        want = dict(pair.split("=") for pair in attributes.split(","))
        assert all({k: e.get(k) for k in ("run", "team")} == {"team": None, **want} for e in turn), turn
        assert {(e["upstream.trace_id"], e["upstream.parent_span_id"]) for e in turn} == {(trace_id, parent_id)}
    spans = receiver.spans()
    roots = sorted((s for s in spans if s["name"] == "invoke_agent qwen-code"), key=lambda s: s["start"])
    assert [(r["trace_id"], r["parent_id"]) for r in roots] == [(t, p) for t, p, _ in CALLERS]
    assert [r["attributes"]["run"] for r in roots] == ["first", "second"], "each turn's spans: its run's attributes"
    assert {s["trace_id"] for s in spans} == {t for t, _, _ in CALLERS}
    assert len(spans) > len(roots), "the turns' model and tool spans too"


def test_an_invalid_traceparent_fails_open_and_is_counted(tmp_path: Path, receiver: OtlpReceiver) -> None:
    paths = prepare(tmp_path, receiver.endpoint, True, ["00-not-a-traceparent-01", f"ff-{'1' * 32}-{'2' * 16}-01"])
    status = collect_cli(paths)
    entries = read_output(paths.output_dir)
    assert entries and not any("upstream.trace_id" in e for e in entries)
    assert all(e.get("run") in ("first", "second") for e in entries if e.get("gen_ai.session.id"))
    assert status["pipeline"]["attributes_left_out"]["TRACEPARENT: not a W3C traceparent, ignored"] > 0
    shown = subprocess.run([sys.executable, "-m", "collector", "status", "--home", str(paths.home)], cwd=ROOT,
                           env=collect_env(paths), capture_output=True, text=True, timeout=60)
    assert "custom attributes left out: TRACEPARENT: not a W3C traceparent, ignored (" in shown.stdout, shown.stdout
    roots = [s for s in receiver.spans() if s["name"] == "invoke_agent qwen-code"]
    assert len(roots) == 2 and all(r["parent_id"] is None for r in roots)


def test_the_context_outlives_the_process_in_the_checkpoint_store(tmp_path: Path, receiver: OtlpReceiver) -> None:
    """A first `collect --once` reads the session's start; the lines after it, written without the
    variables, are read by a second one: their entries get the context saved by the first."""
    paths = prepare(tmp_path, receiver.endpoint, True, [f"00-{t}-{p}-01" for t, p, _ in CALLERS])
    spool = next(paths.spool_dir.glob("*/*.jsonl"))
    lines = spool.read_text().splitlines(keepends=True)
    cut = next(n for n, line in enumerate(lines) if '"event": "UserPromptSubmit"' in line) + 1
    spool.write_text("".join(lines[:cut]))
    shutil.rmtree(paths.home / ".qwen")  # the transcript comes with the second part
    collect_cli(paths)
    early = read_output(paths.output_dir)
    assert early and all(e.get("run") == "first" for e in early if e.get("gen_ai.session.id"))
    rest = [json.loads(line) for line in lines[cut:]]
    with spool.open("a") as f:
        f.writelines(json.dumps({k: v for k, v in r.items() if k not in ("attributes", "traceparent")}) + "\n"
                     for r in rest)
    shutil.copytree(CASE / "home", paths.home, symlinks=True, dirs_exist_ok=True)
    collect_cli(paths)
    later = [e for e in read_output(paths.output_dir) if e["event.id"] not in {x["event.id"] for x in early}]
    assert {e.get("source.kind") for e in later} >= {"hook", "transcript"}
    assert {e.get("run") for e in later if e.get("gen_ai.session.id")} == {"first"}, "one context, from the store"
