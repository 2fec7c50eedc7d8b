"""LoongSuite Pilot's correlation files through the real `collect --once`: a real Qwen Code session of two
turns (tests/fixtures/qwen-code/two_turns_resume), each process started with a TRACEPARENT that the hook
wrote into its spool lines, and a correlation file in Pilot's default folder of the home
(``~/.loongsuite-pilot/acp-correlate/<session id>.jsonl``, the format of Pilot's
``src/core/upstream-link/correlation-store.ts``) holding a session record and a turn record for the second
prompt (its text's SHA-256). The first turn hangs under the session record's span, the second under the
turn record's, not under the environment's (the real OTLP receiver decodes what was sent); with linking
off the file changes nothing."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import FIXTURES, make_paths, read_output
from support.collect_once import collect_cli
from support.otlp_receiver import OtlpReceiver

from collector.paths import Paths

CASE = FIXTURES / "qwen-code" / "two_turns_resume"
SESSION = "41107763-ebf4-494c-ba48-6c6b1ea15d20"
SECOND_PROMPT = "Now run `ls -la` and summarise."  # the case's second UserPromptSubmit
ENV = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")  # both processes' TRACEPARENT
SESSION_SPAN = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
TURN_SPAN = ("5b8aa5a2d2c872e8321cf37308d69df2", "051581bf3cb55c13")


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver().start()
    yield r
    r.stop()


def prepare(tmp_path: Path, endpoint: str, link: bool) -> Paths:
    paths = make_paths(tmp_path)
    shutil.copytree(CASE / "home", paths.home, symlinks=True)
    prompts = []
    for src in (CASE / "spool").glob("*/*.jsonl"):
        out = []
        for line in src.read_text().splitlines():
            record = json.loads(line)
            if record["event"] == "UserPromptSubmit" and record["payload"].get("prompt"):
                prompts.append(record["payload"]["prompt"])
            record = {**{k: record[k] for k in ("ts", "agent", "event")},
                      "traceparent": f"00-{ENV[0]}-{ENV[1]}-01", "payload": record["payload"]}
            out.append(json.dumps(record))
        target = paths.spool_dir / src.parent.name / src.name
        target.parent.mkdir(parents=True)
        target.write_text("\n".join(out) + "\n")
    assert prompts[-1] == SECOND_PROMPT and len(prompts) == 2
    folder = paths.home / ".loongsuite-pilot" / "acp-correlate"  # the default collector.correlation_dir
    folder.mkdir(parents=True)
    lines = [{"type": "session", "traceparent": f"00-{SESSION_SPAN[0]}-{SESSION_SPAN[1]}-01"},
             "a line Pilot's readers would skip too",
             {"type": "turn", "sessionId": SESSION, "contentHash": hashlib.sha256(SECOND_PROMPT.encode()).hexdigest(),
              "contentPrefix": SECOND_PROMPT[:16], "traceparent": f"00-{TURN_SPAN[0]}-{TURN_SPAN[1]}-01"}]
    (folder / f"{SESSION}.jsonl").write_text("".join((json.dumps(x) if isinstance(x, dict) else x) + "\n"
                                                     for x in lines))
    paths.config_dir.mkdir(parents=True)
    paths.config_file.write_text(f'[collector]\nupstream_trace_link = {str(link).lower()}\n'
                                 f'[otlp]\nendpoint = "{endpoint}"\nprotocol = "http/protobuf"\n'
                                 "[ingest]\nenabled = false\n[watchdog]\nenabled = false\n")
    return paths


def test_each_turn_hangs_under_the_span_its_correlation_record_names(tmp_path: Path,
                                                                    receiver: OtlpReceiver) -> None:
    paths = prepare(tmp_path, receiver.endpoint, link=True)
    status = collect_cli(paths)
    entries = [e for e in read_output(paths.output_dir) if "turn.key" in e]
    prompts = sorted((e for e in entries if e["event.name"] == "user.prompt"), key=lambda e: e["time_unix_nano"])
    first_turn, second_turn = prompts[0]["turn.key"], prompts[-1]["turn.key"]
    assert first_turn != second_turn
    for turn, span, source in ((first_turn, SESSION_SPAN, "session"), (second_turn, TURN_SPAN, "turn")):
        mine = [e for e in entries if e["turn.key"] == turn]
        assert {e.get("source.kind") for e in mine} >= {"hook", "transcript"}
        assert {(e["upstream.trace_id"], e["upstream.parent_span_id"], e["upstream.correlation"])
                for e in mine} == {(*span, source)}
    assert not any("gen_ai.input.messages" in e for e in entries), "capture off: the matched text did not leave"
    assert status["pipeline"]["attributes_left_out"] == {"correlation file: a line that is not JSON, skipped": 1}
    spans = receiver.spans()
    roots = sorted((s for s in spans if s["name"] == "invoke_agent qwen-code"), key=lambda s: s["start"])
    assert [(r["trace_id"], r["parent_id"]) for r in roots] == [SESSION_SPAN, TURN_SPAN]
    assert {s["trace_id"] for s in spans} == {SESSION_SPAN[0], TURN_SPAN[0]}, "no span left in the env's trace"
    assert len(spans) > len(roots), "the turns' model and tool spans too"


def test_with_linking_off_the_file_is_not_read(tmp_path: Path, receiver: OtlpReceiver) -> None:
    paths = prepare(tmp_path, receiver.endpoint, link=False)
    status = collect_cli(paths)
    entries = read_output(paths.output_dir)
    assert entries and not any("upstream.trace_id" in e or "upstream.correlation" in e for e in entries)
    assert not status["pipeline"].get("attributes_left_out")
    roots = [s for s in receiver.spans() if s["name"] == "invoke_agent qwen-code"]
    assert len(roots) == 2 and all(r["parent_id"] is None for r in roots)


def test_a_restart_keeps_the_linked_turn_and_does_not_use_the_record_again(tmp_path: Path,
                                                                          receiver: OtlpReceiver) -> None:
    """A first `collect --once` reads the hook lines of the first turn (the session record links it); the
    rest, the transcript with it, is read by a second one: the first turn's transcript entries are still
    under the session record's span (the checkpoint store kept the link), and the second turn, which no
    turn record names now, is not given the used session record again but the environment's TRACEPARENT."""
    paths = prepare(tmp_path, receiver.endpoint, link=True)
    correlation = paths.home / ".loongsuite-pilot" / "acp-correlate" / f"{SESSION}.jsonl"
    correlation.write_text(correlation.read_text().splitlines(keepends=True)[0])  # the session record only
    spool = next(paths.spool_dir.glob("*/*.jsonl"))
    lines = spool.read_text().splitlines(keepends=True)
    cut = next(n for n, line in enumerate(lines) if SECOND_PROMPT.replace("`", "") in line.replace("`", ""))
    spool.write_text("".join(lines[:cut]))
    shutil.rmtree(paths.home / ".qwen")  # the transcript comes with the second part
    collect_cli(paths)
    early = read_output(paths.output_dir)
    assert {(e["upstream.parent_span_id"], e["upstream.correlation"]) for e in early if "turn.key" in e} == {
        (SESSION_SPAN[1], "session")}
    with spool.open("a") as f:
        f.writelines(lines[cut:])
    shutil.copytree(CASE / "home", paths.home, symlinks=True, dirs_exist_ok=True)
    collect_cli(paths)
    seen = {e["event.id"] for e in early}
    later = [e for e in read_output(paths.output_dir) if e["event.id"] not in seen and "turn.key" in e]
    first_turn = next(e["turn.key"] for e in early if e["event.name"] == "user.prompt")
    again = [e for e in later if e["turn.key"] == first_turn]
    rest = [e for e in later if e["turn.key"] != first_turn]
    assert again and {e.get("source.kind") for e in again} == {"transcript"}
    assert {(e["upstream.parent_span_id"], e["upstream.correlation"]) for e in again} == {(SESSION_SPAN[1], "session")}
    assert rest and {(e["upstream.trace_id"], e["upstream.parent_span_id"], e.get("upstream.correlation"))
                     for e in rest} == {(*ENV, None)}
