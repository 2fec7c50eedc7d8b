"""What the hook benchmarks send: a real Claude Code PostToolUse payload (from the test fixtures), and a
free loopback port for a daemon under test."""

from __future__ import annotations

import json
import socket
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "fixtures" / "claude-code" / "tool_then_answer" / "spool"


def payload() -> bytes:
    """The first PostToolUse hook payload of the Claude Code fixture's spool, as the agent sends it."""
    for path in SAMPLE.glob("*/*.jsonl"):
        for line in path.read_text().splitlines():
            envelope = json.loads(line)
            if envelope["event"] == "PostToolUse":
                return json.dumps(envelope["payload"]).encode()
    raise SystemExit("no PostToolUse sample")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
