"""A real OTLP backend: Arize Phoenix (PyPI ``arize-phoenix``) receives our traces; we read them back
through Phoenix's own REST API and check the span tree.

Phoenix lives in its own virtual environment (``.cache/phoenix-venv``, created on first use: about
740 MB and 90 s) so its pins never touch the collector's. It is started on 127.0.0.1 with random ports.
Set ``AGENT_COLLECTOR_SKIP_PHOENIX=1`` to skip these tests on a machine without the registry.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, collect, make_paths, prepare_fixture, truth_from_file
from support.waits import free_port

from collector.exporters.otlp import build_otlp_exporters
from collector.exporters.queue import QueuedExporter, QueueOptions

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".cache" / "phoenix-venv"
PHOENIX = VENV / "bin" / "phoenix"
FAST = QueueOptions(backoff_initial=0.1, backoff_max=0.5, tick_interval=0.05, drain_timeout=5.0)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(
        os.environ.get("AGENT_COLLECTOR_SKIP_PHOENIX") == "1", reason="AGENT_COLLECTOR_SKIP_PHOENIX=1"
    ),
]


def ensure_phoenix() -> Path:
    """Create the Phoenix venv once (cached in .cache/); returns the ``phoenix`` executable."""
    if PHOENIX.exists():
        return PHOENIX
    VENV.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, timeout=300)
    pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    done = subprocess.run([*pip, "arize-phoenix"], capture_output=True, text=True, timeout=1500)
    if done.returncode != 0 or not PHOENIX.exists():
        pytest.fail(f"cannot install arize-phoenix into {VENV}:\n{done.stderr[-3000:]}")
    return PHOENIX


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - 127.0.0.1 only
        return json.loads(response.read())


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    executable = ensure_phoenix()
    work = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(work),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_WORKING_DIR": str(work / "data"),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (work / "phoenix.log").open("wb")
    proc = subprocess.Popen(
        [str(executable), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(base + "/", timeout=2):  # noqa: S310
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("Phoenix did not start:\n" + (work / "phoenix.log").read_text()[-3000:])
                time.sleep(0.5)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()


def phoenix_spans(base: str, project: str = "default") -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = []
    cursor = None
    while True:
        url = f"{base}/v1/projects/{project}/spans?limit=1000" + (f"&cursor={cursor}" if cursor else "")
        page = get_json(url)
        spans.extend(page["data"])
        cursor = page.get("next_cursor")
        if not cursor:
            return spans


def send_traces(entries: list[dict[str, Any]], endpoint: str, tmp: Path) -> None:
    config = {"endpoint": endpoint, "signals": ["traces"], "turn_grace": 0, "timeout": 5}
    for exporter in build_otlp_exporters(config, {}, make_paths(tmp), options=FAST):
        assert isinstance(exporter, QueuedExporter)
        exporter.export(entries)
        assert exporter.flush(60), exporter.stats()
        assert exporter.stats()["inner"]["sent_spans"] > 0
        exporter.shutdown()


def wait_for_spans(base: str, trace_ids: set[str], count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 60
    while True:
        spans = [s for s in phoenix_spans(base) if s["context"]["trace_id"] in trace_ids]
        if len(spans) >= count or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def check_tree(spans: list[dict[str, Any]], session: str, turns: int) -> None:
    """One AGENT root per turn; LLM and TOOL children under it; tokens only on LLM spans."""
    by_id = {s["context"]["span_id"]: s for s in spans}
    roots = [s for s in spans if not s["parent_id"]]
    assert len(roots) == turns, [s["name"] for s in roots]
    for root in roots:
        assert root["name"] == "invoke_agent claude-code"
        assert root["span_kind"] == "AGENT"
        assert root["attributes"]["gen_ai.conversation.id"] == session
        assert not any(k.startswith("gen_ai.usage") for k in root["attributes"])
    for span in spans:
        if span["parent_id"]:
            parent = by_id[span["parent_id"]]
            assert parent["context"]["trace_id"] == span["context"]["trace_id"]
            assert parent["start_time"] <= span["start_time"] <= span["end_time"] <= parent["end_time"]
        if span["name"].startswith("chat "):
            assert span["span_kind"] == "LLM" and by_id[span["parent_id"]]["span_kind"] == "AGENT"
            assert span["attributes"]["gen_ai.provider.name"] == "anthropic"
        elif span["name"].startswith("execute_tool "):
            assert span["span_kind"] == "TOOL"
            assert span["attributes"]["gen_ai.tool.name"] == span["name"].split(" ", 1)[1]


def token_sum(spans: list[dict[str, Any]], key: str) -> int:
    return sum(int(s["attributes"].get(key, 0)) for s in spans)


def test_phoenix_receives_the_fixture_session_traces(phoenix: str, tmp_path: Path) -> None:
    case = FIXTURES / "claude-code" / "two_turns_resume"
    entries = collect(prepare_fixture(case, tmp_path / "run"))
    send_traces(entries, phoenix, tmp_path / "export")
    expected = json.loads((case / "expected.json").read_text())
    from collector.exporters.trace_builder import trace_id_for

    trace_ids = {f"{trace_id_for('claude-code', expected['sessions'][0], t):032x}" for t in expected["turns"]}
    spans = wait_for_spans(phoenix, trace_ids, 8)
    assert len(spans) == 8, [s["name"] for s in spans]  # 2 turns x (root + 2 chat + 1 tool)
    check_tree(spans, expected["sessions"][0], turns=2)
    truth = truth_from_file(case / "response_usage.jsonl")
    assert token_sum(spans, "gen_ai.usage.input_tokens") == sum(t[0] * n for t, n in truth.items())
    assert token_sum(spans, "gen_ai.usage.output_tokens") == sum(t[1] * n for t, n in truth.items())
    # a second send (a replay after a crash) creates no second trace
    send_traces(entries, phoenix, tmp_path / "export2")
    # then another session's traces, and once Phoenix shows them it has taken the replay sent before
    marker_case = FIXTURES / "claude-code" / "tool_then_answer"
    marker = json.loads((marker_case / "expected.json").read_text())
    send_traces(collect(prepare_fixture(marker_case, tmp_path / "marker")), phoenix, tmp_path / "export3")
    marker_ids = {f"{trace_id_for('claude-code', marker['sessions'][0], t):032x}" for t in marker["turns"]}
    assert wait_for_spans(phoenix, marker_ids, 1), "the marker session's traces reached Phoenix"
    again = [s for s in phoenix_spans(phoenix) if s["context"]["trace_id"] in trace_ids]
    assert {s["context"]["span_id"] for s in again} == {s["context"]["span_id"] for s in spans}


@pytest.mark.e2e
def test_phoenix_receives_a_real_claude_code_session(phoenix: str, tmp_path: Path) -> None:
    """The real Claude Code CLI (e2e harness, fake model server), hooks installed by our deployer,
    collected once, traces to Phoenix, read back through its API."""
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    from fake_llm import FakeLLMServer
    from harness import init_workdir, run_scenario, write_agent_config
    from npm_agents import ensure_agents

    from collector.config import load_config
    from collector.definitions import load_definitions
    from collector.deploy import install_agent

    ensure_agents()
    home = tmp_path / "home"
    home.mkdir()
    workdir = init_workdir(tmp_path / "work", git=True)
    paths = make_paths(tmp_path, home)
    with FakeLLMServer(log_path=tmp_path / "fake_llm_requests.jsonl") as server:
        write_agent_config("claude-code", home, workdir, server)
        # No daemon runs here, so Claude's hooks go to settings.json (command hooks spool on their own)
        # rather than to the drop-in plugin's http endpoint.
        paths.agents_override_dir.mkdir(parents=True, exist_ok=True)
        (paths.agents_override_dir / "claude-code.json").write_text(
            '{"id": "claude-code", "integration_variant": "settings"}')
        defn = load_definitions(paths.agents_override_dir).agents["claude-code"]
        install_agent(defn, paths)
        results = run_scenario("claude-code", "tool_then_answer", home, workdir, server, log_dir=tmp_path)
        assert [r.returncode for r in results] == [0] * len(results)
        usage = list(server.responses)
    config = load_config(paths.config_file, env={})
    config.otlp = {"enabled": True, "endpoint": phoenix, "signals": ["traces"], "turn_grace": 0}
    entries = collect(paths, config=config)
    sessions = {e["gen_ai.session.id"] for e in entries if e.get("gen_ai.session.id")}
    assert len(sessions) == 1
    session = sessions.pop()
    turns = {e["gen_ai.turn.id"] for e in entries if e["event.name"] == "user.prompt"}
    from collector.exporters.trace_builder import trace_id_for

    trace_ids = {f"{trace_id_for('claude-code', session, t):032x}" for t in turns}
    spans = wait_for_spans(phoenix, trace_ids, 1 + len(usage) + 1)
    check_tree(spans, session, turns=len(turns))
    names = sorted(s["name"] for s in spans)
    assert names.count("execute_tool Bash") == 1 and names.count("chat claude-sonnet-4-5") == len(usage)
    from support import truth_from_lines

    truth = truth_from_lines(usage)
    assert token_sum(spans, "gen_ai.usage.input_tokens") == sum(t[0] * n for t, n in truth.items())
    assert token_sum(spans, "gen_ai.usage.output_tokens") == sum(t[1] * n for t, n in truth.items())
