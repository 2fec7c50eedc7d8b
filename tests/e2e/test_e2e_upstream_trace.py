"""Real Qwen Code 0.24.4 started the way a traced program starts an agent: with TRACEPARENT (W3C Trace
Context) and AGENT_COLLECTOR_ATTRIBUTES in its environment. The collector is installed by `agent-collector
install` (hooks in ~/.qwen/settings.json, run in the agent's process), and exports OTLP traces to the real
receiver (tests/support/otlp_receiver.py, decoding the protobuf requests) with
``collector.upstream_trace_link`` on: every turn span is in the caller's trace, its root a child of the
caller's span, and every entry, transcript ones too, and every span carry the run's attributes."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from collector_e2e import NO_NPM_RETRY, check_calls, data_dir, run_collected
from fake_llm import FakeLLMServer
from harness import AgentHome
from support.otlp_receiver import OtlpReceiver

pytestmark = pytest.mark.e2e
AGENT = "qwen-code"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver().start()
    yield r
    r.stop()


def configure(env: AgentHome, endpoint: str, link: bool) -> None:
    config = env.home / ".config" / "agent-collector" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[collector]\nupstream_trace_link = {str(link).lower()}\n'
                      f'[otlp]\nendpoint = "{endpoint}"\nprotocol = "http/protobuf"\n')


def test_a_run_started_with_traceparent_is_traced_under_the_callers_span(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer, receiver: OtlpReceiver
) -> None:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    configure(agent_home, receiver.endpoint, link=True)
    caller = {"TRACEPARENT": f"00-{trace_id}-{parent_id}-01",
              "AGENT_COLLECTOR_ATTRIBUTES": "ticket=OPS-12,pipeline=nightly%20build"}
    entries = run_collected(AGENT, agent_home, fake_llm, "two_turns_resume", extra_env=caller)
    check_calls(entries, fake_llm, 2, ["success", "success"], ["run_shell_command", "write_file"])

    kinds = {e.get("source.kind") for e in entries}
    assert {"hook", "transcript"} <= kinds
    unstamped = [e["event.name"] for e in entries if e.get("ticket") != "OPS-12"
                 or e.get("pipeline") != "nightly build"]
    assert not unstamped, f"entries without the run's attributes: {unstamped}"
    assert {e["upstream.trace_id"] for e in entries} == {trace_id}
    assert {e["upstream.parent_span_id"] for e in entries} == {parent_id}

    spans = receiver.spans()
    roots = [s for s in spans if s["name"] == f"invoke_agent {AGENT}"]
    assert len(roots) == 2, [s["name"] for s in spans]  # one per turn
    assert {s["trace_id"] for s in spans} == {trace_id}, "every span is in the caller's trace"
    assert {r["parent_id"] for r in roots} == {parent_id}, "each turn's root is a child of the caller's span"
    ids = {s["span_id"] for s in spans}
    assert all(s["parent_id"] in ids for s in spans if s not in roots), "the other spans hang under the roots"
    assert {s["name"].split()[0] for s in spans} >= {"invoke_agent", "chat", "execute_tool"}
    assert all((s["attributes"]["ticket"], s["attributes"]["pipeline"]) == ("OPS-12", "nightly build")
               for s in spans), "the run's attributes are on every span"


def test_without_the_switch_the_traceparent_changes_nothing(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer, receiver: OtlpReceiver
) -> None:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    configure(agent_home, receiver.endpoint, link=False)
    caller = {"TRACEPARENT": f"00-{trace_id}-{parent_id}-01",
              "AGENT_COLLECTOR_ATTRIBUTES": "gen_ai.agent.type=x,team=a"}
    entries = run_collected(AGENT, agent_home, fake_llm, "tool_then_answer", extra_env=caller)
    assert entries and all(e.get("team") == "a" for e in entries)
    assert all(e["gen_ai.agent.type"] == AGENT and "upstream.trace_id" not in e for e in entries)
    spans = receiver.spans()
    roots = [s for s in spans if s["name"] == f"invoke_agent {AGENT}"]
    assert len(roots) == 1 and roots[0]["parent_id"] is None and roots[0]["trace_id"] != trace_id
    status = (data_dir(agent_home) / "state" / "status.json").read_text()
    assert "AGENT_COLLECTOR_ATTRIBUTES" in status and "gen_ai.agent.type" in status, "the refused key is counted"


@pytest.mark.parametrize("agent", ["opencode", "pi", "claude-code"])
def test_a_plugin_carries_the_context_too(
    e2e_agents_bin: Path, agent_home: AgentHome, fake_llm: FakeLLMServer, receiver: OtlpReceiver, agent: str
) -> None:
    """Real OpenCode 1.18.33, pi 0.73.1 and Claude Code 2.1.332 with their default integrations: OpenCode's
    spool plugin (integrations/opencode/agent-collector.js) and pi's extension
    (integrations/pi/agent-collector.ts) read the same variables in the agent's process, Claude Code's
    drop-in plugin runs the hook script; every entry carries the run's attributes, here under LoongSuite
    Pilot's variable name, as a launcher written for Pilot sets it."""
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    configure(agent_home, receiver.endpoint, link=True)
    caller = {**NO_NPM_RETRY, "TRACEPARENT": f"00-{trace_id}-{parent_id}-01",
              "LOONGSUITE_PILOT_SPAN_ATTRIBUTES": "multica.task=t-7"}
    entries = run_collected(agent, agent_home, fake_llm, "tool_then_answer", extra_env=caller)
    assert "hook" in {e.get("source.kind") for e in entries}  # the plugin's lines (the store's copies are dropped)
    assert all(e.get("multica.task") == "t-7" for e in entries), [e["event.name"] for e in entries
                                                                   if e.get("multica.task") != "t-7"]
    spans = receiver.spans()
    roots = [s for s in spans if s["name"] == f"invoke_agent {agent}"]
    assert roots and {r["parent_id"] for r in roots} == {parent_id}
    assert {s["trace_id"] for s in spans} == {trace_id}
