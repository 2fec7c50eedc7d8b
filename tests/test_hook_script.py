"""The POSIX hook script, run for real with sh (dash here) and bash, as the agents run it."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

HOOK = Path(__file__).resolve().parents[1] / "hooks" / "agent-collector-hook.sh"
NO_FLOCK = {"AGENT_COLLECTOR_HOOK_NO_FLOCK": "1"}
SHELLS = [s for s in ("sh", "dash", "bash") if shutil.which(s)]


def run_hook(
    spool: Path,
    *args: str,
    stdin: bytes | None = b"",
    shell: str = "sh",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [shell, str(HOOK), *args[:2], str(spool), *args[2:]],
        input=stdin,
        capture_output=True,
        env=full_env,
        timeout=20,
    )


def day_file(spool: Path, agent: str) -> Path:
    day = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    return spool / agent / f"{agent}-{day}.jsonl"


def read_lines(path: Path) -> list[dict]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    return [json.loads(line) for line in raw.split(b"\n")[:-1]]


@pytest.mark.parametrize("shell", SHELLS)
def test_pretty_payload_becomes_one_envelope_line(tmp_path: Path, shell: str) -> None:
    payload = {"session_id": "s1", "tool_input": {"command": "echo 'hi'\n"}, "n": [1, 2.5, None], "u": "é中"}
    before = time.time()
    data = json.dumps(payload, indent=2).encode()
    result = run_hook(tmp_path, "claude-code", "PreToolUse", stdin=data, shell=shell)
    assert result.returncode == 0
    assert result.stdout == b"" and result.stderr == b""
    [line] = read_lines(day_file(tmp_path, "claude-code"))
    assert line["agent"] == "claude-code" and line["event"] == "PreToolUse"
    assert line["payload"] == payload
    assert before - 1 <= line["ts"] <= time.time() + 1
    assert isinstance(line["ts"], float)  # GNU date gives the fraction


def test_empty_and_whitespace_stdin_give_null_payload(tmp_path: Path) -> None:
    run_hook(tmp_path, "qwen-code", "Stop", stdin=b"")
    run_hook(tmp_path, "qwen-code", "Stop", stdin=b" \n\t\r\n")
    lines = read_lines(day_file(tmp_path, "qwen-code"))
    assert [line["payload"] for line in lines] == [None, None]


@pytest.mark.parametrize(
    "raw",
    [
        b"not json at all", b'{"a": 1,}', b"{unquoted: 1}", b'{"a": "tab\there"}', b'{"a":1} trailing',
        b'"\\q"',
    ],
)
def test_invalid_json_is_kept_as_a_string_on_one_line(tmp_path: Path, raw: bytes) -> None:
    result = run_hook(tmp_path, "gemini-cli", "AfterTool", stdin=raw + b"\nsecond line \\ \"q\"")
    assert result.returncode == 0 and result.stdout == b""
    [line] = read_lines(day_file(tmp_path, "gemini-cli"))
    assert line["payload"] is None
    expected = (raw + b" second line \\ \"q\"").decode()
    assert line["payload_raw"] == expected


def test_codex_notify_payload_from_last_argv(tmp_path: Path) -> None:
    note = {"type": "agent-turn-complete", "thread-id": "t1", "input-messages": ["a\nb"], "cwd": "/w"}
    result = run_hook(tmp_path, "codex", "notify", json.dumps(note, indent=1), stdin=b'{"ignored": true}')
    assert result.returncode == 0 and result.stdout == b""
    [line] = read_lines(day_file(tmp_path, "codex"))
    assert line["event"] == "notify" and line["payload"] == note


def test_twenty_parallel_writers_with_200kb_payloads_never_interleave(tmp_path: Path) -> None:
    _parallel_writers(tmp_path, env={})


def test_twenty_parallel_writers_with_mkdir_lock(tmp_path: Path) -> None:
    _parallel_writers(tmp_path, env={"AGENT_COLLECTOR_HOOK_NO_FLOCK": "1"})


def _parallel_writers(spool: Path, env: dict[str, str]) -> None:
    writers = 20
    procs = []
    for i in range(writers):
        body = {"writer": i, "blob": f"{i:02d}" * 100_000, "nested": {"list": list(range(50))}}
        data = json.dumps(body, indent=2).encode()
        assert len(data) > 200_000
        proc = subprocess.Popen(
            ["sh", str(HOOK), "claude-code", "PostToolUse", str(spool)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, **env},
        )
        procs.append((proc, data))
    for proc, data in procs:  # feed them all, then let them race for the lock
        assert proc.stdin is not None
        proc.stdin.write(data)
        proc.stdin.close()
    for proc, _ in procs:
        assert proc.wait(timeout=30) == 0
        assert proc.stdout is not None and proc.stdout.read() == b""
    lines = read_lines(day_file(spool, "claude-code"))
    assert len(lines) == writers
    assert sorted(line["payload"]["writer"] for line in lines) == list(range(writers))
    for line in lines:
        i = line["payload"]["writer"]
        assert line["payload"]["blob"] == f"{i:02d}" * 100_000
    assert not (spool / "claude-code" / "pending").exists()
    assert not list((spool / "claude-code").glob(".hook.*"))  # temp files cleaned up


def test_unwritable_spool_exits_zero_without_output(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    result = run_hook(blocker / "spool", "claude-code", "Stop", stdin=b"{}")  # parent is a file
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to drop to nobody")
def test_read_only_spool_dir_as_another_user(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    (spool / "claude-code").mkdir(parents=True)
    os.chmod(tmp_path, 0o755)
    os.chmod(spool, 0o555)
    os.chmod(spool / "claude-code", 0o555)
    result = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         "sh", str(HOOK), "claude-code", "Stop", str(spool)],
        input=b'{"a": 1}', capture_output=True, timeout=20,
    )
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""
    assert list((spool / "claude-code").iterdir()) == []


def test_bad_arguments_exit_zero_and_write_nothing(tmp_path: Path) -> None:
    for args in (["claude-code"], ["../escape", "Stop"], ["", "Stop"], [".hidden", "Stop"]):
        result = subprocess.run(["sh", str(HOOK), *args, str(tmp_path)], input=b"{}", capture_output=True)
        assert result.returncode == 0 and result.stdout == b""
    assert list(tmp_path.iterdir()) == []
    run_hook(tmp_path, "claude-code", "Bad Event", stdin=b"{}")
    [line] = read_lines(day_file(tmp_path, "claude-code"))
    assert line["event"] == "invalid-event-name"


def test_lock_timeout_writes_pending_file_then_next_hook_drains_it(tmp_path: Path) -> None:
    agent_dir = tmp_path / "claude-code"
    agent_dir.mkdir()
    with open(agent_dir / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        start = time.monotonic()
        result = run_hook(tmp_path, "claude-code", "Stop", stdin=b'{"first": true}')
        waited = time.monotonic() - start
        assert result.returncode == 0
        assert 1.5 < waited < 10  # bounded wait (~2 s), then gave up on the lock
        fcntl.flock(lock, fcntl.LOCK_UN)
    pending = list((agent_dir / "pending").glob("*.json"))
    assert len(pending) == 1
    assert json.loads(pending[0].read_bytes())["payload"] == {"first": True}
    run_hook(tmp_path, "claude-code", "Stop", stdin=b'{"second": true}')
    lines = read_lines(day_file(tmp_path, "claude-code"))
    assert [line["payload"] for line in lines] == [{"first": True}, {"second": True}]
    assert list((agent_dir / "pending").glob("*.json")) == []


def test_stale_mkdir_lock_of_a_dead_process_is_broken(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    lockd = tmp_path / "opencode" / ".lock.d"
    lockd.mkdir(parents=True)
    (lockd / "pid").write_text(f"{dead.pid}\n")
    start = time.monotonic()
    result = run_hook(tmp_path, "opencode", "session.idle", stdin=b"{}", env=NO_FLOCK)
    assert result.returncode == 0
    assert time.monotonic() - start < 1.9  # broken well before the 2 s give-up
    assert [line["payload"] for line in read_lines(day_file(tmp_path, "opencode"))] == [{}]
    assert not lockd.exists()


def test_mkdir_lock_without_pid_file_is_broken_after_two_rounds(tmp_path: Path) -> None:
    lockd = tmp_path / "opencode" / ".lock.d"
    lockd.mkdir(parents=True)  # a holder killed between mkdir and writing its pid
    result = run_hook(tmp_path, "opencode", "session.idle", stdin=b"{}", env=NO_FLOCK)
    assert result.returncode == 0
    assert len(read_lines(day_file(tmp_path, "opencode"))) == 1


def test_live_mkdir_lock_holder_is_respected(tmp_path: Path) -> None:
    lockd = tmp_path / "opencode" / ".lock.d"
    lockd.mkdir(parents=True)
    (lockd / "pid").write_text(f"{os.getpid()}\n")  # alive: this test process
    result = run_hook(tmp_path, "opencode", "session.idle", stdin=b"{}", env=NO_FLOCK)
    assert result.returncode == 0
    assert lockd.exists()
    assert not day_file(tmp_path, "opencode").exists()
    assert len(list((tmp_path / "opencode" / "pending").glob("*.json"))) == 1


def _fuzz_cases(count: int) -> list[str]:
    import random

    rng = random.Random(7)

    def value(depth: int = 0) -> object:
        roll = rng.random()
        if depth > 3 or roll < 0.3:
            return rng.choice([1, -2.5, 0, 1e5, True, False, None, "s", 'q"u\\o\nte', "é中", "\t", ""])
        if roll < 0.6:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(["a", 'b"', "c\\", "ü", ""]): value(depth + 1) for _ in range(rng.randint(0, 3))}

    alphabet = list('{}[],:"\\ ntrufalse0123456789.-+eE\t') + ["\\u00", '\\"']
    cases = []
    for _ in range(count):
        text = list(json.dumps(value(), ensure_ascii=rng.random() < 0.5))
        if rng.random() < 0.7:  # break most of them a little
            for _ in range(rng.randint(1, 3)):
                i = rng.randint(0, max(0, len(text) - 1))
                roll = rng.random()
                if roll < 0.4 and text:
                    del text[i]
                elif roll < 0.8:
                    text.insert(i, rng.choice(alphabet))
                elif text:
                    text[i] = rng.choice(alphabet)
        cases.append("".join(text))
    return cases


def _strict_json(text: str) -> bool:
    def no_constants(name: str) -> None:
        raise ValueError(name)

    try:
        json.loads(text, parse_constant=no_constants)
    except (ValueError, RecursionError):
        return False
    return True


def test_json_check_agrees_with_python_on_fuzzed_payloads(tmp_path: Path) -> None:
    cases = _fuzz_cases(80)
    for case in cases:
        run_hook(tmp_path, "fuzz", "E", stdin=case.encode())
    lines = read_lines(day_file(tmp_path, "fuzz"))  # every line, valid input or not, is valid JSON
    assert len(lines) == len(cases)
    for case, line in zip(cases, lines, strict=True):
        text = case.replace("\n", " ").strip()
        if text and _strict_json(text):
            assert line["payload"] == json.loads(text), case
        else:
            assert line["payload"] is None and ("payload_raw" in line) == bool(text), case
