#!/usr/bin/env python3
"""Capture a fixture from a REAL agent run: the pinned CLI (tests/e2e) against the fake model server,
with the collector's own hooks installed by `agent-collector install`.

    .venv/bin/python scripts/capture_fixture.py --agent claude-code --case failing_command \\
        --turn 'Please run `cat /nonexistent/file-xyz` in the shell and tell me what happened.'
    (a turn starting with '+' resumes the session in a new process; one starting with '!' is interrupted:
    SIGINT to the agent's process group two seconds after the model asked for a tool, then SIGKILL;
    {workdir} is the project folder)
    .venv/bin/python scripts/capture_fixture.py --agent codex --case resume12 --scenario resume12
    (a scenario of tests/e2e/harness.py, run by its run_scenario: every turn a new process)
    .venv/bin/python scripts/capture_fixture.py --agent codex --case tool_then_answer --scenario tool_then_answer \
        --telemetry --into tests/fixtures/codex-telemetry
    (`install --telemetry` too and `agent-collector run` up on a free port while the agent runs, so the
    agent's own OTLP export is spooled in spool/otlp/<agent>/)

Writes tests/fixtures/<agent>/<case>/: home/<the agent's session files>, spool/<agent>/*.jsonl (what our
hook wrote), response_usage.jsonl (the server's exact usage per reply). expected.json is written by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from fake_llm import FakeLLMServer  # noqa: E402
from harness import (  # noqa: E402
    SCENARIOS,
    init_workdir,
    run_agent,
    run_agent_interrupted,
    run_scenario,
    write_agent_config,
)
from npm_agents import ensure_agents  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from support.waits import free_port, wait_listening  # noqa: E402

SESSION_GLOBS = {
    "claude-code": [".claude/projects/*/*.jsonl", ".claude/projects/*/*/subagents/*.jsonl"],
    "codex": [".codex/sessions/*/*/*/rollout-*.jsonl"],
    "gemini-cli": [".gemini/tmp/*/chats/session-*.jsonl", ".gemini/tmp/*/chats/*/*.jsonl"],
    "qwen-code": [".qwen/projects/*/chats/*.jsonl", ".qwen/projects/*/chats/*/*.jsonl",
                  ".qwen/projects/*/subagents/**/*.jsonl"],
    "opencode": [".local/share/opencode/opencode.db*"],
    "kilo-code": [".local/share/kilo/kilo.db*"],
    "copilot": [".copilot/session-state/*/events.jsonl", ".copilot/session-store.db*"],
}
# OpenCode and Kilo run a background `npm install` against the harness's dead registry: no retries
EXTRA_ENV = {"npm_config_fetch_retries": "0"}


def _env(home: Path, port: int | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_COLLECTOR_")}
    env.update(HOME=str(home), AGENT_COLLECTOR_HOME=str(home))
    if port is not None:
        env["AGENT_COLLECTOR_INGEST__PORT"] = str(port)
    return env


def collector(home: Path, *args: str, port: int | None = None) -> None:
    subprocess.run([sys.executable, "-m", "collector", *args], cwd=ROOT, env=_env(home, port), check=True)


@contextmanager
def daemon(home: Path, port: int | None) -> Iterator[None]:
    """`agent-collector run` up while the agent runs (with --telemetry: its OTLP receiver), else nothing."""
    if port is None:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-m", "collector", "run"], cwd=ROOT, env=_env(home, port),
                            stdout=subprocess.DEVNULL)
    try:
        wait_listening(port)
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def run_turn(agent: str, home: Path, work: Path, server: FakeLLMServer, turn: str) -> Any:
    resume, interrupt = turn.startswith("+"), turn.lstrip("+").startswith("!")
    prompt = turn.lstrip("+").lstrip("!")
    if not interrupt:
        return run_agent(agent, home, work, server, prompt, resume=resume, extra_env=EXTRA_ENV)
    before = len(server.decisions())
    return run_agent_interrupted(agent, home, work, server, prompt, resume=resume,
                                 started=lambda: any(d[0] == "tool" for d in server.decisions()[before:]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agent", required=True, choices=sorted(SESSION_GLOBS))
    ap.add_argument("--case", required=True)
    turns = ap.add_mutually_exclusive_group(required=True)
    turns.add_argument("--turn", action="append")
    turns.add_argument("--scenario", choices=sorted(SCENARIOS))
    ap.add_argument("--telemetry", action="store_true", help="install --telemetry, the daemon up during the run")
    ap.add_argument("--into", type=Path, help="the fixtures folder of the case (default tests/fixtures/<agent>)")
    args = ap.parse_args()
    ensure_agents()
    dest = (args.into or ROOT / "tests" / "fixtures" / args.agent) / args.case
    port = free_port() if args.telemetry else None
    with tempfile.TemporaryDirectory(prefix=f"capture-{args.agent}-") as tmp:
        home, work = Path(tmp) / "home", init_workdir(Path(tmp) / "work", git=True)
        home.mkdir()
        with FakeLLMServer() as server:
            write_agent_config(args.agent, home, work, server)
            if args.agent == "claude-code":  # command hooks into the spool (the plugin variant posts to a daemon)
                override = home / ".config" / "agent-collector" / "agents.d" / "claude-code.json"
                override.parent.mkdir(parents=True, exist_ok=True)
                override.write_text(json.dumps({"id": "claude-code", "integration_variant": "settings"}))
            collector(home, "install", "--agent", args.agent, *(["--telemetry"] if port else []), port=port)
            with daemon(home, port):
                if args.scenario:
                    results = run_scenario(args.agent, args.scenario, home, work, server, extra_env=EXTRA_ENV)
                else:
                    results = [run_turn(args.agent, home, work, server, turn.replace("{workdir}", str(work)))
                               for turn in args.turn]
            for result in results:
                print(f"turn rc={result.returncode}: {result.stdout[-300:]}", file=sys.stderr)
            usage = list(server.responses)
        if dest.exists():
            shutil.rmtree(dest)
        for pattern in SESSION_GLOBS[args.agent]:
            for path in home.glob(pattern):
                target = dest / "home" / path.relative_to(home)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
        spool = home / ".local" / "share" / "agent-collector" / "spool"
        if spool.exists():
            shutil.copytree(spool, dest / "spool", ignore=shutil.ignore_patterns(".lock", "pending"))
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "response_usage.jsonl").write_text("".join(json.dumps(u) + "\n" for u in usage))
        listing = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
        print("files the run left in HOME:\n  " + "\n  ".join(listing), file=sys.stderr)
    print(f"wrote {dest}", file=sys.stderr)


if __name__ == "__main__":
    main()
