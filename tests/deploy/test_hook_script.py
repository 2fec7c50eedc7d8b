"""The hook script, run for real as the agents run it: with bash (what `install` writes), with sh (dash
here: it re-executes itself with bash) and on the POSIX fallback (no bash: date, tr and a lock). Its
lines are read back with the daemon's own spool decoder, which is where the JSON check lives now."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from collector.sources.spool_lines import DROPPED, PAYLOAD_INVALID, decode_spool_line

HOOK = Path(__file__).resolve().parents[2] / "hooks" / "agent-collector-hook.sh"
POSIX = {"AGENT_COLLECTOR_HOOK_NO_BASH": "1"}
NO_FLOCK = {**POSIX, "AGENT_COLLECTOR_HOOK_NO_FLOCK": "1"}
MODES = {"bash": ("bash", {}), "sh": ("sh", {}), "posix": ("sh", POSIX)}


def run_hook(
    spool: Path,
    *args: str,
    stdin: bytes | None = b"",
    mode: str = "bash",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    shell, mode_env = MODES[mode]
    return subprocess.run(
        [shell, str(HOOK), *args[:2], str(spool), *args[2:]],
        input=stdin,
        capture_output=True,
        env={**os.environ, **mode_env, **(env or {})},
        timeout=30,
    )


def day_file(spool: Path, agent: str) -> Path:
    day = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    return spool / agent / f"{agent}-{day}.jsonl"


def decoded(path: Path) -> list[tuple[Any, str | None]]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    return [decode_spool_line(line) for line in raw.split(b"\n")[:-1]]


def read_lines(path: Path) -> list[dict[str, Any]]:
    """Every line an intact envelope with a valid payload."""
    out = []
    for data, counter in decoded(path):
        assert counter is None and isinstance(data, dict)
        out.append(data)
    return out


@pytest.mark.parametrize("mode", MODES)
def test_pretty_payload_becomes_one_envelope_line(tmp_path: Path, mode: str) -> None:
    payload = {"session_id": "s1", "tool_input": {"command": "echo 'hi'\n"}, "n": [1, 2.5, None], "u": "é中"}
    before = time.time()
    data = json.dumps(payload, indent=2).encode().replace(b"\n", b"\r\n")
    result = run_hook(tmp_path, "claude-code", "PreToolUse", stdin=data, mode=mode)
    assert result.returncode == 0
    assert result.stdout == b"" and result.stderr == b""
    [line] = read_lines(day_file(tmp_path, "claude-code"))
    assert line["agent"] == "claude-code" and line["event"] == "PreToolUse"
    assert line["payload"] == payload
    assert before - 1 <= line["ts"] <= time.time() + 1
    assert isinstance(line["ts"], float)  # $EPOCHREALTIME, or GNU date's %N: the fraction is there


@pytest.mark.parametrize("mode", MODES)
def test_empty_and_whitespace_stdin_give_null_payload(tmp_path: Path, mode: str) -> None:
    run_hook(tmp_path, "qwen-code", "Stop", stdin=b"", mode=mode)
    run_hook(tmp_path, "qwen-code", "Stop", stdin=b" \n\t\r\n", mode=mode)
    lines = read_lines(day_file(tmp_path, "qwen-code"))
    assert [line["payload"] for line in lines] == [None, None]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "raw",
    [
        b"not json at all", b'{"a": 1,}', b"{unquoted: 1}", b'{"a": "tab\there"}', b'{"a":1} trailing',
        b'"\\q"', b'1,"agent":"other","x":2', b'{"a":1},"payload":{"b":2}',
    ],
)
def test_invalid_json_is_kept_as_a_string_on_one_line(tmp_path: Path, raw: bytes, mode: str) -> None:
    result = run_hook(tmp_path, "gemini-cli", "AfterTool", stdin=raw + b"\nsecond line \\ \"q\"", mode=mode)
    assert result.returncode == 0 and result.stdout == b""
    [(line, counter)] = decoded(day_file(tmp_path, "gemini-cli"))
    assert counter == PAYLOAD_INVALID
    assert line["agent"] == "gemini-cli" and line["event"] == "AfterTool"  # a payload cannot rewrite these
    assert line["payload"] is None
    assert line["payload_raw"] == (raw + b" second line \\ \"q\"").decode()


@pytest.mark.parametrize("mode", MODES)
def test_codex_notify_payload_from_last_argv(tmp_path: Path, mode: str) -> None:
    note = {"type": "agent-turn-complete", "thread-id": "t1", "input-messages": ["a\nb"], "cwd": "/w"}
    big = {**note, "last-assistant-message": "x\n" * 5000}  # above 4096 bytes: the tr path
    for body in (note, big):
        result = run_hook(tmp_path, "codex", "notify", json.dumps(body, indent=1), stdin=b'{"ignored": true}',
                          mode=mode)
        assert result.returncode == 0 and result.stdout == b""
    lines = read_lines(day_file(tmp_path, "codex"))
    assert [line["event"] for line in lines] == ["notify", "notify"]
    assert [line["payload"] for line in lines] == [note, big]


def _two_megabytes(kind: str) -> bytes:
    if kind == "newlines":  # tool output pretty-printed: a line break every few bytes
        return json.dumps({"stdout": ["ab"] * 250_000}, indent=1).encode()
    if kind == "quotes":
        return json.dumps({"text": '"' * 1_000_000}).encode()
    if kind == "escapes":
        return json.dumps({"text": "\\\n\t\u0001é" * 150_000}).encode()
    return b'{"cut": "' + b"\\\"" * 1_000_000  # invalid: never closed


@pytest.mark.parametrize("mode", ["bash", "posix"])
@pytest.mark.parametrize("kind", ["newlines", "quotes", "escapes", "invalid"])
def test_two_megabyte_payloads_of_any_kind_arrive_whole(tmp_path: Path, kind: str, mode: str) -> None:
    body = _two_megabytes(kind)
    assert len(body) >= 2_000_000
    assert run_hook(tmp_path, "claude-code", "PostToolUse", stdin=body, mode=mode).returncode == 0
    [(line, counter)] = decoded(day_file(tmp_path, "claude-code"))
    if kind == "invalid":
        assert counter == PAYLOAD_INVALID and line["payload_raw"] == body.decode()
    else:
        assert counter is None and line["payload"] == json.loads(body)


def _writer_body(i: int, size: int) -> bytes:
    blob = f"{i:03d}" * (size // 3)
    if i % 3 == 0:  # pretty: goes through tr; the others are compact like the agents' payloads
        return json.dumps({"writer": i, "blob": blob, "nested": {"list": list(range(20))}}, indent=2).encode()
    return json.dumps({"writer": i, "blob": blob}).encode()


def test_300_writers_of_100kb_16_at_once_every_line_intact_without_a_lock(tmp_path: Path) -> None:
    """Small (one builtin printf) and big (one dd write) lines from concurrent hooks, on O_APPEND
    and no lock: no line may be torn or mixed with another."""
    bodies = [_writer_body(i, 100_000 if i % 5 else 600) for i in range(300)]
    running: list[subprocess.Popen[bytes]] = []
    argv = ["bash", str(HOOK), "claude-code", "PostToolUse", str(tmp_path)]
    for body in bodies:
        if len(running) == 16:
            assert running.pop(0).wait(timeout=60) == 0
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        assert proc.stdin is not None
        proc.stdin.write(body)
        proc.stdin.close()
        running.append(proc)
    for proc in running:
        assert proc.wait(timeout=60) == 0
    lines = read_lines(day_file(tmp_path, "claude-code"))
    assert len(lines) == 300
    assert sorted(line["payload"]["writer"] for line in lines) == list(range(300))
    for line in lines:
        assert line["payload"] == json.loads(bodies[line["payload"]["writer"]])
    assert sorted(p.name for p in (tmp_path / "claude-code").iterdir()) == [day_file(tmp_path, "claude-code").name]


def _writes_to(logs: list[Path], target: str) -> list[int]:
    """Sizes of the write(2) calls made on ``target``, from ``strace -ff`` logs (one file per process,
    so no call is split in two) of openat/dup2/write."""
    sizes = []
    for log in logs:
        fds: set[str] = set()
        for call in log.read_text().splitlines():
            result = call.rsplit("= ", 1)[-1]
            if call.startswith("openat(") and f'"{target}"' in call:
                assert "O_APPEND" in call
                fds.add(result)
            elif call.startswith("dup2("):
                old, new = call[5 : call.index(")")].split(", ")
                (fds.add if old in fds else fds.discard)(new)
            elif call.startswith("write(") and call[6 : call.index(",")] in fds:
                sizes.append(int(result))
    return sizes


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
@pytest.mark.parametrize(
    ("size", "via"),
    [(600, "stdin"), (4000, "stdin"), (4050, "stdin"), (4096, "stdin"), (4097, "stdin"), (100_000, "stdin"),
     (2_500_000, "stdin"), (600, "argv"), (4050, "argv"), (100_000, "argv")],
)
def test_a_line_of_any_size_is_one_write_on_o_append(tmp_path: Path, size: int, via: str) -> None:
    body = json.dumps({"pad": "x" * size})[: size - 2].encode() + b'"}'
    log = tmp_path / "strace"
    spool = tmp_path / "spool"
    (spool / "claude-code").mkdir(parents=True)
    argv = [body.decode()] if via == "argv" else []
    subprocess.run(["strace", "-ff", "-qq", "-e", "trace=openat,dup2,write", "-o", str(log),
                    "bash", str(HOOK), "claude-code", "PostToolUse", str(spool), *argv],
                   input=b"" if argv else body, check=True, timeout=60)
    target = day_file(spool, "claude-code")
    written = target.read_bytes()
    assert _writes_to(sorted(tmp_path.glob("strace.*")), str(target)) == [len(written)]
    assert [line["payload"] for line in read_lines(target)] == [json.loads(body)]


@pytest.mark.parametrize("env", [POSIX, NO_FLOCK], ids=["flock", "mkdir-lock"])
def test_posix_fallback_twenty_parallel_writers_with_200kb_payloads_never_interleave(
    tmp_path: Path, env: dict[str, str]
) -> None:
    writers = 20
    procs = []
    for i in range(writers):
        body = {"writer": i, "blob": f"{i:02d}" * 100_000, "nested": {"list": list(range(50))}}
        data = json.dumps(body, indent=2).encode()
        proc = subprocess.Popen(
            ["sh", str(HOOK), "claude-code", "PostToolUse", str(tmp_path)],
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
    lines = read_lines(day_file(tmp_path, "claude-code"))
    assert sorted(line["payload"]["writer"] for line in lines) == list(range(writers))
    for line in lines:
        i = line["payload"]["writer"]
        assert line["payload"]["blob"] == f"{i:02d}" * 100_000
    assert not (tmp_path / "claude-code" / "pending").exists()


def _group_gone(pgid: int, wait_s: float = 5.0) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("first", [b"", b'{"a": "', b'{"a": "' + b"x" * 9000], ids=["nothing", "small", "big"])
def test_input_that_never_ends_is_dropped_at_the_cap_and_counted(tmp_path: Path, mode: str, first: bytes) -> None:
    shell, mode_env = MODES[mode]
    env = {**os.environ, **mode_env, "AGENT_COLLECTOR_HOOK_TIMEOUT": "0.3"}
    proc = subprocess.Popen([shell, str(HOOK), "claude-code", "Stop", str(tmp_path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    assert proc.stdin is not None
    proc.stdin.write(first)
    proc.stdin.flush()  # and keep it open: the agent never closes its end
    try:
        assert proc.wait(timeout=20) == 0
        assert _group_gone(proc.pid)  # nothing of it left running (watchdog, timeout, tr)
    finally:
        proc.stdin.close()
        if proc.poll() is None:
            proc.kill()
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read() == b"" and proc.stderr.read() == b""
    [(data, counter)] = decoded(day_file(tmp_path, "claude-code"))
    assert data is None and counter == DROPPED
    assert json.loads(day_file(tmp_path, "claude-code").read_bytes())["dropped"] == "timeout"


def test_killed_by_the_agent_it_records_the_drop(tmp_path: Path) -> None:
    proc = subprocess.Popen(["bash", str(HOOK), "claude-code", "Stop", str(tmp_path)], stdin=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / "claude-code").exists() and time.monotonic() < deadline:
            time.sleep(0.02)  # it has started (made its directory) and waits for input
        time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert _group_gone(proc.pid)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
    lines = day_file(tmp_path, "claude-code").read_bytes().splitlines()
    assert [json.loads(line)["dropped"] for line in lines] == ["signal"]


@pytest.mark.parametrize("mode", MODES)
def test_unwritable_spool_exits_zero_without_output(tmp_path: Path, mode: str) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    result = run_hook(blocker / "spool", "claude-code", "Stop", stdin=b"{}", mode=mode)  # parent is a file
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to drop to nobody")
@pytest.mark.parametrize("mode", MODES)
def test_read_only_spool_dir_as_another_user(tmp_path: Path, mode: str) -> None:
    spool = tmp_path / "spool"
    (spool / "claude-code").mkdir(parents=True)
    os.chmod(tmp_path, 0o755)
    os.chmod(spool, 0o555)
    os.chmod(spool / "claude-code", 0o555)
    shell, env = MODES[mode]
    result = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         shell, str(HOOK), "claude-code", "Stop", str(spool)],
        input=b'{"a": 1}', capture_output=True, timeout=20, env={**os.environ, **env},
    )
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""
    assert list((spool / "claude-code").iterdir()) == []


@pytest.mark.parametrize("mode", MODES)
def test_bad_arguments_exit_zero_and_write_nothing(tmp_path: Path, mode: str) -> None:
    shell, env = MODES[mode]
    for args in (["claude-code"], ["../escape", "Stop"], ["", "Stop"], [".hidden", "Stop"]):
        result = subprocess.run([shell, str(HOOK), *args, str(tmp_path)], input=b"{}", capture_output=True,
                                env={**os.environ, **env})
        assert result.returncode == 0 and result.stdout == b""
    assert list(tmp_path.iterdir()) == []
    run_hook(tmp_path, "claude-code", "Bad Event", stdin=b"{}", mode=mode)
    [line] = read_lines(day_file(tmp_path, "claude-code"))
    assert line["event"] == "invalid-event-name"


def test_posix_lock_timeout_writes_pending_file_then_next_hook_drains_it(tmp_path: Path) -> None:
    agent_dir = tmp_path / "claude-code"
    agent_dir.mkdir()
    with open(agent_dir / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = run_hook(tmp_path, "claude-code", "Stop", stdin=b'{"first": true}', mode="posix")
        assert result.returncode == 0  # gave up on the lock (after its bounded wait)
        fcntl.flock(lock, fcntl.LOCK_UN)
    pending = list((agent_dir / "pending").glob("*.json"))
    assert len(pending) == 1
    assert json.loads(pending[0].read_bytes())["payload"] == {"first": True}
    run_hook(tmp_path, "claude-code", "Stop", stdin=b'{"second": true}', mode="posix")
    lines = read_lines(day_file(tmp_path, "claude-code"))
    assert [line["payload"] for line in lines] == [{"first": True}, {"second": True}]
    assert list((agent_dir / "pending").glob("*.json")) == []


def test_posix_stale_mkdir_lock_of_a_dead_process_is_broken(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    lockd = tmp_path / "opencode" / ".lock.d"
    lockd.mkdir(parents=True)
    (lockd / "pid").write_text(f"{dead.pid}\n")
    result = run_hook(tmp_path, "opencode", "session.idle", stdin=b"{}", env=NO_FLOCK, mode="posix")
    assert result.returncode == 0
    assert [line["payload"] for line in read_lines(day_file(tmp_path, "opencode"))] == [{}]
    assert not lockd.exists()


def test_posix_mkdir_lock_without_pid_file_is_broken_after_two_rounds(tmp_path: Path) -> None:
    lockd = tmp_path / "opencode" / ".lock.d"
    lockd.mkdir(parents=True)  # a holder killed between mkdir and writing its pid
    result = run_hook(tmp_path, "opencode", "session.idle", stdin=b"{}", env=NO_FLOCK, mode="posix")
    assert result.returncode == 0
    assert len(read_lines(day_file(tmp_path, "opencode"))) == 1


def test_posix_live_mkdir_lock_holder_is_respected(tmp_path: Path) -> None:
    lockd = tmp_path / "opencode" / ".lock.d"
    lockd.mkdir(parents=True)
    (lockd / "pid").write_text(f"{os.getpid()}\n")  # alive: this test process
    result = run_hook(tmp_path, "opencode", "session.idle", stdin=b"{}", env=NO_FLOCK, mode="posix")
    assert result.returncode == 0
    assert lockd.exists()
    assert not day_file(tmp_path, "opencode").exists()
    assert len(list((tmp_path / "opencode" / "pending").glob("*.json"))) == 1


def _fuzz_cases(count: int) -> list[str]:
    rng = random.Random(7)

    def value(depth: int = 0) -> object:
        roll = rng.random()
        if depth > 3 or roll < 0.3:
            return rng.choice([1, -2.5, 0, 1e5, True, False, None, "s", 'q"u\\o\nte', "é中", "\t", ""])
        if roll < 0.6:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(["a", 'b"', "c\\", "ü", ""]): value(depth + 1) for _ in range(rng.randint(0, 3))}

    alphabet = list('{}[],:"\\ ntrufalse0123456789.-+eE\t') + ["\\u00", '\\"', '"}', ',"payload":']
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


def test_fuzzed_payloads_are_kept_exactly_valid_or_not(tmp_path: Path) -> None:
    cases = _fuzz_cases(80)
    for case in cases:
        run_hook(tmp_path, "fuzz", "E", stdin=case.encode())
    lines = decoded(day_file(tmp_path, "fuzz"))  # one line per call, whatever came in
    assert len(lines) == len(cases)
    for case, (line, counter) in zip(cases, lines, strict=True):
        assert line["agent"] == "fuzz" and line["event"] == "E", case
        text = case.replace("\n", " ").strip()
        if not text:
            assert line["payload"] is None and counter is None, case
        elif _strict_json(text):
            assert line["payload"] == json.loads(text) and counter is None, case
        else:
            assert line["payload"] is None and counter == PAYLOAD_INVALID, case
            assert line["payload_raw"].strip() == text, case


def test_the_daemon_counts_what_the_hook_dropped_or_could_not_parse_and_keeps_the_rest(tmp_path: Path) -> None:
    from support import FIXTURES, collect, prepare_fixture

    case = FIXTURES / "claude-code" / "tool_then_answer"
    alone = {e["event.id"] for e in collect(prepare_fixture(case, tmp_path / "alone"))}
    paths = prepare_fixture(case, tmp_path / "odd")
    spool = paths.spool_dir
    assert run_hook(spool, "claude-code", "PostToolUse", stdin=b'{"session_id": "s9", broken').returncode == 0
    slow = subprocess.Popen(["bash", str(HOOK), "claude-code", "Stop", str(spool)], stdin=subprocess.PIPE,
                            env={**os.environ, "AGENT_COLLECTOR_HOOK_TIMEOUT": "0.2"})
    try:
        assert slow.wait(timeout=20) == 0  # stdin still open: dropped at the cap
    finally:
        assert slow.stdin is not None
        slow.stdin.close()
    output = collect(paths)
    assert alone and alone <= {e["event.id"] for e in output}  # every record of the fixture, next to the odd lines
    status = json.loads((paths.state_dir / "status.json").read_text())["sources"]["claude-code:hooks"]
    assert status[DROPPED] == 1 and status[PAYLOAD_INVALID] == 1


def test_a_big_payload_without_tr_is_dropped_and_counted_not_half_written(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "dd", "timeout", "mkdir"):  # no tr on this PATH
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    body = json.dumps({"blob": "x" * 10_000}).encode()
    result = subprocess.run([str(bin_dir / "bash"), str(HOOK), "claude-code", "PostToolUse", str(tmp_path)],
                            input=body, capture_output=True, env={"PATH": str(bin_dir)}, timeout=30)
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""
    lines = day_file(tmp_path, "claude-code").read_bytes().splitlines()
    assert [json.loads(line)["dropped"] for line in lines] == ["error"]


# -- The agent's invocation context in the hook line: ``AGENT_COLLECTOR_ATTRIBUTES`` and ``TRACEPARENT`` from
# the agent's environment go into the spool line as plain JSON strings, a value the hook cannot pass safely
# (a quote, a backslash, a control character, too long, a traceparent that is not hex and dashes) as
# ``false``; the line stays one valid envelope with its payload, in every shell mode of the hook.

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"  # W3C Trace Context's example


@pytest.mark.parametrize("mode", MODES)
def test_context_from_the_environment_is_in_the_line(tmp_path: Path, mode: str) -> None:
    env = {"AGENT_COLLECTOR_ATTRIBUTES": "team=web,ticket=ABC-1 é", "TRACEPARENT": TRACEPARENT}
    assert run_hook(tmp_path, "qwen-code", "Stop", stdin=b'{"session_id":"s"}', mode=mode, env=env).returncode == 0
    [line] = read_lines(day_file(tmp_path, "qwen-code"))
    assert line["attributes"] == "team=web,ticket=ABC-1 é" and line["traceparent"] == TRACEPARENT
    assert line["payload"] == {"session_id": "s"} and line["event"] == "Stop"


@pytest.mark.parametrize("mode", MODES)
def test_loongsuite_pilots_variable_stands_in_for_ours(tmp_path: Path, mode: str) -> None:
    """A launcher written for LoongSuite Pilot sets LOONGSUITE_PILOT_SPAN_ATTRIBUTES; ours wins when set."""
    pilot = {"LOONGSUITE_PILOT_SPAN_ATTRIBUTES": "multica.task=t1"}
    run_hook(tmp_path, "qwen-code", "Stop", stdin=b"{}", mode=mode, env={**pilot, "AGENT_COLLECTOR_ATTRIBUTES": ""})
    run_hook(tmp_path, "qwen-code", "Stop", stdin=b"{}", mode=mode, env={**pilot, "AGENT_COLLECTOR_ATTRIBUTES": "a=1"})
    run_hook(tmp_path, "qwen-code", "Stop", stdin=b"{}", mode=mode,
             env={"LOONGSUITE_PILOT_SPAN_ATTRIBUTES": 'a="b"'})
    assert [line["attributes"] for line in read_lines(day_file(tmp_path, "qwen-code"))] == ["multica.task=t1", "a=1",
                                                                                            False]


@pytest.mark.parametrize("mode", MODES)
def test_without_context_the_line_is_as_before(tmp_path: Path, mode: str) -> None:
    run_hook(tmp_path, "qwen-code", "Stop", stdin=b"{}", mode=mode,
             env={"AGENT_COLLECTOR_ATTRIBUTES": "", "TRACEPARENT": ""})
    [line] = read_lines(day_file(tmp_path, "qwen-code"))
    assert set(line) == {"ts", "agent", "event", "payload"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("attributes", "traceparent"), [
    ('a="b"', "00-XYZ-00f067aa0ba902b7-01"),
    ("a=b\\c", "00-" + "a" * 200),
    ("a=\tb", '00-"},"payload":1}'),
    ("x" * 1025, "00-4bf9\n2f35"),
])
def test_a_hostile_value_becomes_false_and_breaks_nothing(tmp_path: Path, mode: str, attributes: str,
                                                          traceparent: str) -> None:
    env = {"AGENT_COLLECTOR_ATTRIBUTES": attributes, "TRACEPARENT": traceparent}
    run_hook(tmp_path, "qwen-code", "Stop", stdin=b'{"n":1}', mode=mode, env=env)
    [line] = read_lines(day_file(tmp_path, "qwen-code"))
    assert line["attributes"] is False and line["traceparent"] is False
    assert line["payload"] == {"n": 1}
