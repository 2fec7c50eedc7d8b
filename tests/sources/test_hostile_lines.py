"""The table's "smaller" findings about lines, through the real daemon on a real Claude Code capture: a BOM
before the hook spool's first line, a lone UTF-16 surrogate (how Node writes a cut emoji) in the answer's
text, a 1970-01-01 timestamp and a negative token count. Each line still gives its entry (the surrogate
line its tokens), every entry of the capture is in the output exactly once, the daemon answers, and the
entry with the refused count names it (``collector.invalid_fields``); 1970-01-01 is taken for no time, so
the observed time stands, as for a line without one."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

from support import FIXTURES, assert_no_duplicates, read_output
from support.robust import Daemon

CASE = FIXTURES / "claude-code" / "tool_then_answer"


def spoil(daemon: Daemon) -> None:
    """The capture, with the four hostile lines made of its own lines."""
    shutil.rmtree(daemon.home)
    shutil.copytree(CASE / "home", daemon.home, symlinks=True)
    shutil.copytree(CASE / "spool", daemon.data / "spool")
    [spool] = (daemon.data / "spool" / "claude-code").glob("*.jsonl")
    spool.write_bytes(b"\xef\xbb\xbf" + spool.read_bytes())
    [transcript] = daemon.home.glob(".claude/projects/*/*.jsonl")
    lines = transcript.read_bytes().splitlines()
    out = []
    for raw in lines:
        line = json.loads(raw)
        message = line.get("message") if isinstance(line.get("message"), dict) else {}
        if line.get("type") == "assistant" and message.get("content", [{}])[0].get("text", "").startswith("Done."):
            message["usage"]["output_tokens"] = 17
            raw = json.dumps(line).replace("Done.", "Done \\ud83d.").encode()  # a lone high surrogate
        elif line.get("type") == "assistant" and message.get("content", [{}])[0].get("text", "").startswith("I'll"):
            line["timestamp"] = "1970-01-01T00:00:00Z"  # the first model response
            message["usage"]["output_tokens"] = -5
            message["usage"]["input_tokens"] = -3  # not to be summed with the cache counts into a plausible one
            raw = json.dumps(line).encode()
        out.append(raw)
    transcript.write_bytes(b"\n".join(out) + b"\n")


def test_bom_surrogate_1970_and_negative_tokens_cost_no_line(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path)
    spoil(daemon)
    expected = Counter(json.loads((CASE / "expected.json").read_text())["counts"])
    daemon.start()
    try:
        entries = daemon.wait_output(lambda es: Counter(e["event.name"] for e in es) == expected)
        assert daemon.proc is not None and daemon.get("/v1/status")["pid"] == daemon.proc.pid
    finally:
        assert daemon.stop() == 0
    entries = read_output(daemon.out)
    assert_no_duplicates(entries)
    assert Counter(e["event.name"] for e in entries) == expected, "every entry of the capture, each once"
    assert [e["event.name"] for e in entries].count("session.start") == 1, "the BOM line's SessionStart"
    responses = [e for e in entries if e["event.name"] == "llm.response"]
    assert 17 in [e.get("gen_ai.usage.output_tokens") for e in responses], "the surrogate line keeps its tokens"
    [odd] = [e for e in responses if "collector.invalid_fields" in e]
    assert sorted(odd["collector.invalid_fields"]) == ["gen_ai.usage.input_tokens: outside 0..2**53-1",
                                                       "gen_ai.usage.output_tokens: outside 0..2**53-1"]
    # the negative counts are refused, never passed through nor summed into another: the refused fields stay
    # out; a total, if any, is the call's true one, from its other line (the tool_use block of the same API
    # message carries the whole usage, 12638 + 49 + 2230 + 7433: the merge fills it, docs/merge.md)
    assert not {"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} & set(odd), odd
    assert odd.get("gen_ai.usage.total_tokens") in (None, 12638 + 49 + 2230 + 7433), odd
    assert not [e for e in responses for k, v in e.items() if k.startswith("gen_ai.usage.") and isinstance(v, int)
                and v < 0], "no negative count anywhere"
    assert odd["time_unix_nano"] == odd["observed_time_unix_nano"], "1970-01-01 is no time: the observed one"
