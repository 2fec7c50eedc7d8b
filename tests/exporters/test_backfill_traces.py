"""`collect --once` with OTLP on finishes the traces of a backfill; the daemon keeps its live timers.

A backfill of yesterday's sessions (real captures of five agents, their files dated a day back; all but one
without the hook spool, as on a machine where hooks were off) goes through a real `collect --once`
process to a real OTLP/HTTP protobuf receiver. Every turn arrives as one ``invoke_agent`` root with a chat
span per model call and a tool span per tool call, the tokens on the chat spans are the model server's
own (``response_usage.jsonl``), and a turn nothing ended is sent marked incomplete because its entries are
old, not because of when they were read. The daemon over the same files, with a long grace, sends nothing
before its timers, and a later `collect --once` sends what it left open.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, ROOT, read_output, truth_from_file
from support.otlp_receiver import OtlpReceiver

from collector.exporters.trace_builder import trace_id_for
from collector.paths import resolve_paths

# (case, with its hook spool)
CASES = [
    ("claude-code/two_turns_resume", False),
    ("claude-code/tool_then_answer", True),
    ("codex/two_tools", False),
    ("gemini-cli/subagent", False),
    ("qwen-code/two_turns_resume", False),
    ("opencode/subagent", False),
]
DAY_S = 86400


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver().start()
    yield r
    r.stop()


def backfill(home: Path) -> None:
    """The cases' homes merged into one (no file of one case overwrites another's), spools as chosen, and
    every file's mtime a day back."""
    spool = resolve_paths(home, env={}).spool_dir
    for name, with_spool in CASES:
        case = FIXTURES / name
        for src in sorted(p for p in (case / "home").rglob("*") if p.is_file()):
            dst = home / src.relative_to(case / "home")
            assert not dst.exists(), f"{name} and another case share {dst}"
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
        for src in (case / "spool").glob("*/*.jsonl") if with_spool else []:
            (spool / src.parent.name).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, spool / src.parent.name / src.name)
    yesterday = time.time() - DAY_S
    for path in home.rglob("*"):
        if path.is_file():
            os.utime(path, (yesterday, yesterday))


def configure(home: Path, endpoint: str, **extra: float) -> None:
    config = resolve_paths(home, env={}).config_file
    config.parent.mkdir(parents=True, exist_ok=True)
    lines = ["[otlp]", f'endpoint = "{endpoint}"', 'protocol = "http/protobuf"']
    lines += [f"{k} = {v}" for k, v in extra.items()]
    config.write_text("\n".join(lines) + "\n[ingest]\nenabled = false\n[watchdog]\nenabled = false\n")


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_COLLECTOR_", "XDG_", "OTEL_"))}
    env["HOME"] = str(home)
    return env


def collect_once(home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "collector", "collect", "--once", "--home", str(home)],
                          cwd=ROOT, env=environment(home), capture_output=True, text=True, timeout=180)


def trace_of(entry: dict[str, Any], key: str) -> str:
    """The trace id of ``entry``'s session's turn ``key`` (the exporter's deterministic id)."""
    return f"{trace_id_for(entry['gen_ai.agent.type'], str(entry.get('gen_ai.session.id') or ''), key):032x}"


def turns_in(entries: list[dict[str, Any]]) -> dict[str, tuple[str, bool]]:
    """trace id -> (the turn's agent, whether an entry of the input ended it), from the JSONL output."""
    ended = {trace_of(e, k) for e in entries for k in e.get("turn.ends", [])}
    traces = {trace_of(e, e["turn.key"]): e["gen_ai.agent.type"] for e in entries if "turn.key" in e}
    return {trace: (agent, trace in ended) for trace, agent in traces.items()}


TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens",
          "gen_ai.usage.cache_creation.input_tokens")


def span_tokens(spans: list[dict[str, Any]]) -> Counter[tuple[int, ...]]:
    return Counter(tuple(s["attributes"].get(k, 0) for k in TOKENS)
                   for s in spans if s["attributes"].get("gen_ai.operation.name") == "chat")


def assert_traces(spans: list[dict[str, Any]], entries: list[dict[str, Any]]) -> None:
    """One root per turn of the input, every other span inside a rooted tree of its trace, a chat span per
    model call and a tool span per tool call of the turn, incomplete exactly where nothing ended the turn."""
    turns = turns_in(entries)
    roots = [s for s in spans if s["parent_id"] is None]
    assert Counter(s["trace_id"] for s in roots) == Counter(list(turns)), "one invoke_agent root per turn"
    for root in roots:
        agent, ended = turns[root["trace_id"]]
        assert root["name"] == f"invoke_agent {agent}"
        assert root["attributes"].get("agent_collector.turn.incomplete", False) is (not ended)
        inside = {s["span_id"]: s for s in spans if s["trace_id"] == root["trace_id"]}
        for span in inside.values():
            parent, hops = span, 0
            while parent["parent_id"] is not None and hops < 10:
                parent, hops = inside[parent["parent_id"]], hops + 1
            assert parent is root, f"{span['name']} hangs off its turn's root"
        turn_entries = [e for e in entries if "turn.key" in e and trace_of(e, e["turn.key"]) == root["trace_id"]]
        responses = {e.get("gen_ai.response.id") or e["event.id"] for e in turn_entries
                     if e["event.name"] == "llm.response"}
        chats = [s for s in inside.values() if s["name"].startswith("chat")]
        assert len(chats) == len(responses), f"{agent}: a chat span per model call"
        calls = {e["gen_ai.tool.call.id"] for e in turn_entries if e["event.name"] == "tool.call"}
        tools = {s["attributes"]["gen_ai.tool.call.id"] for s in inside.values()
                 if s["name"].startswith("execute_tool")}
        assert tools == calls, f"{agent}: a tool span per tool call"


def served_tokens() -> tuple[Counter[tuple[int, int, int, int]], int]:
    """The model server's usage over every case, and how many of its calls no file records."""
    served: Counter[tuple[int, int, int, int]] = Counter()
    unrecorded = 0
    for name, _ in CASES:
        served += truth_from_file(FIXTURES / name / "response_usage.jsonl")
        unrecorded += json.loads((FIXTURES / name / "expected.json").read_text()).get("unrecorded_model_calls", 0)
    return served, unrecorded


def test_collect_once_sends_every_turn_of_yesterdays_sessions(tmp_path: Path, receiver: OtlpReceiver) -> None:
    home = tmp_path / "home"
    backfill(home)
    configure(home, receiver.endpoint)

    result = collect_once(home)

    assert result.returncode == 0, result.stderr
    assert "not delivered yet" not in result.stderr
    entries = read_output(resolve_paths(home, env={}).output_dir)
    spans = receiver.spans()
    assert {e["gen_ai.agent.type"] for e in entries} == {n.split("/")[0] for n, _ in CASES}
    assert_traces(spans, entries)
    roots = [s for s in spans if s["parent_id"] is None]
    flags = {bool(r["attributes"].get("agent_collector.turn.incomplete")) for r in roots}
    assert flags == {True, False}, "turns ended by the input and turns that only went quiet, both sent"
    served, unrecorded = served_tokens()
    seen = span_tokens(spans)
    assert not seen - served, "every chat span carries a call the server answered, with its exact numbers"
    assert sum((served - seen).values()) == unrecorded
    assert len(receiver.logs()) == len(entries)
    for agent in ("gemini-cli", "opencode"):  # each sub-agent's spans hang under the tool call that started it
        (sub,) = [s for s in spans if s["name"].startswith("invoke_agent") and s["parent_id"] is not None
                  and s["attributes"]["gen_ai.conversation.id"] in _sessions(entries, agent)]
        (tool,) = [s for s in spans if s["span_id"] == sub["parent_id"]]
        assert tool["attributes"]["gen_ai.tool.call.id"] == sub["attributes"]["gen_ai.subagent.parent_tool_call.id"]
        inside = {s["name"].split()[0] for s in spans if s["parent_id"] == sub["span_id"]}
        assert inside == {"chat", "execute_tool"}, agent


def _sessions(entries: list[dict[str, Any]], agent: str) -> set[str]:
    return {e["gen_ai.session.id"] for e in entries if e["gen_ai.agent.type"] == agent and "gen_ai.session.id" in e}


def test_collect_once_again_sends_nothing_twice(tmp_path: Path, receiver: OtlpReceiver) -> None:
    home = tmp_path / "home"
    backfill(home)
    configure(home, receiver.endpoint)
    assert collect_once(home).returncode == 0
    first = len(receiver.spans())

    assert collect_once(home).returncode == 0

    assert first > 0 and len(receiver.spans()) == first


def test_collect_once_with_the_backend_down_says_what_waits_and_the_next_run_sends_it(
        tmp_path: Path, receiver: OtlpReceiver) -> None:
    """Every OTLP request is refused (503): the run still exits, naming per queue what is left, and the next
    run, with the backend back, delivers every turn."""
    home = tmp_path / "home"
    backfill(home)
    configure(home, receiver.endpoint)
    receiver.fail_with = 503

    down = collect_once(home)

    assert down.returncode == 0, down.stderr
    waiting = [line for line in down.stderr.splitlines() if "not delivered yet" in line]
    assert {line.split(":")[0] for line in waiting} == {f"otlp-default-{s}" for s in ("logs", "traces", "metrics")}
    assert all("503" in line for line in waiting), waiting
    assert receiver.spans() == [] and receiver.requests > 0
    receiver.fail_with = None

    assert collect_once(home).returncode == 0

    entries = read_output(resolve_paths(home, env={}).output_dir)
    assert_traces(receiver.spans(), entries)
    assert len(receiver.logs()) == len(entries)


def _status(home: Path) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError):
        return dict(json.loads((resolve_paths(home, env={}).state_dir / "status.json").read_text()))
    return {}


def _traces_settled(home: Path) -> dict[str, Any] | None:
    """The daemon's trace exporter, once every queued entry reached it."""
    traces = _status(home).get("exporters", {}).get("otlp-default-traces")
    if traces and traces["enqueued"] > 0 and traces["queued"] == 0 and traces["inner"]["open_turns"] > 0:
        return dict(traces)
    return None


def test_the_daemon_keeps_its_timers_and_a_later_collect_once_finishes(tmp_path: Path,
                                                                       receiver: OtlpReceiver) -> None:
    """`run` over the same backfill, with an hour of grace and idle: every entry reaches the trace exporter
    and the logs arrive, but no turn is sent (the daemon judges by wall-clock time since arrival, as ever),
    not even at its stop; the next `collect --once` sends all of them."""
    home = tmp_path / "home"
    backfill(home)
    configure(home, receiver.endpoint, turn_grace=3600, turn_idle_timeout=3600)
    log = (tmp_path / "daemon.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "collector", "run", "--home", str(home)], cwd=ROOT,
                            env=environment(home), stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 90
        while (settled := _traces_settled(home)) is None and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert settled is not None, (tmp_path / "daemon.log").read_text()
        entries = read_output(resolve_paths(home, env={}).output_dir)
        while len(receiver.logs()) < len(entries) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(receiver.logs()) == len(entries) > 0
        assert receiver.spans() == [] and settled["inner"]["sent_spans"] == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()
    assert receiver.spans() == [], "a stop sends no live turn early"
    configure(home, receiver.endpoint)  # the default idle timeout: the captures are older than that

    result = collect_once(home)

    assert result.returncode == 0, result.stderr
    assert_traces(receiver.spans(), read_output(resolve_paths(home, env={}).output_dir))


# -- the rule itself, and a backend that is down ----------------------------------------------------------
MIN_NS = 60 * 10**9


def _entry(name: str, time_ns: int, session: str = "s", **fields: Any) -> dict[str, Any]:
    return {"event.name": name, "event.id": f"{session}-{name}-{time_ns}", "time_unix_nano": time_ns,
            "gen_ai.agent.type": "claude-code", "gen_ai.session.id": session, **fields}


def test_end_of_input_judges_by_the_entries_own_time() -> None:
    """Read now: an ended turn goes at once (no grace), a quiet turn whose last entry is older than the idle
    timeout goes incomplete, a quiet turn with a recent entry stays open; the daemon's rule (wall-clock
    since arrival) sends none of them yet."""
    from collector.exporters.turns import TurnAssembler

    now = time.time_ns()
    asm = TurnAssembler(idle_ns=5 * MIN_NS, grace_ns=3 * 10**9)
    for entry in [_entry("user.prompt", now - 90 * MIN_NS, "ended"), _entry("session.end", now - 89 * MIN_NS, "ended"),
                  _entry("user.prompt", now - 60 * MIN_NS, "quiet"), _entry("llm.response", now - 59 * MIN_NS, "quiet"),
                  _entry("user.prompt", now - MIN_NS, "live")]:
        asm.add(entry, now_ns=now)
    assert asm.due(now) == [], "the daemon waits out grace and idle from arrival"
    released = {t.session: t.complete for t in asm.end_of_input(now)}
    assert released == {"ended": True, "quiet": False}
    assert [t.session for t in asm.open.values()] == ["live"]
    (live,) = asm.end_of_input(now + 4 * MIN_NS + 1)
    assert live.session == "live" and not live.complete


def test_end_of_input_with_the_backend_down_says_what_is_left(tmp_path: Path, receiver: OtlpReceiver) -> None:
    """The spans wait in the exporter's saved outbox, the count is returned, and the next run sends them."""
    from support import make_paths

    from collector.exporters.otlp import build_otlp_exporters
    from collector.exporters.queue import QueuedExporter, QueueOptions

    fast = QueueOptions(backoff_initial=0.05, backoff_max=0.2, tick_interval=0.05, drain_timeout=0.5)
    old = time.time_ns() - DAY_S * 10**9
    usage = {"gen_ai.usage.input_tokens": 7, "gen_ai.usage.output_tokens": 3}
    entries = [_entry("user.prompt", old, **{"gen_ai.turn.id": "t1"}),
               _entry("llm.response", old + 10**9, **{"gen_ai.turn.id": "t1", "gen_ai.response.id": "r1", **usage})]
    config = {"endpoint": receiver.endpoint, "signals": ["traces"], "timeout": 1}
    receiver.fail_with = 503
    (queue,) = build_otlp_exporters(config, {}, make_paths(tmp_path), options=fast)
    assert isinstance(queue, QueuedExporter)
    queue.export(entries)
    left = queue.end_of_input(stall_s=1.0, limit_s=30)
    queue.shutdown()
    assert (left.queued, left.unsent) == (0, 2) and left.error and "503" in left.error
    assert receiver.spans() == []

    receiver.fail_with = None
    (again,) = build_otlp_exporters(config, {}, make_paths(tmp_path), options=fast)
    assert isinstance(again, QueuedExporter)
    assert again.end_of_input(stall_s=5.0, limit_s=30).empty
    again.shutdown()
    spans = receiver.spans()
    assert sorted(s["name"] for s in spans) == ["chat", "invoke_agent claude-code"]
    assert span_tokens(spans) == Counter({(7, 3, 0, 0): 1})
