"""Run one external program with bounds: no shell, its own process group, a deadline, and caps on what it
may print. Whatever it does (hang, flood its output, exit non-zero, not exist), the caller gets a
:class:`ProcessResult` saying so within ``timeout_s`` plus a short grace; the whole process group is killed
when the program overruns, so a helper it forked does not outlive it.

Used by the ``command`` source and the external agent plugins (:mod:`collector.external`)."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

KILL_GRACE_S = 1.0  # after SIGKILL of the group, how long we wait for the pipes to close


@dataclass(frozen=True, slots=True)
class Limits:
    timeout_s: float
    max_stdout: int
    max_stderr: int


@dataclass(frozen=True, slots=True)
class ProcessResult:
    exit_code: int | None  # None: it did not exit by itself (killed by us) or never started
    stdout: bytes
    stderr: bytes
    duration_s: float
    error: str | None = None  # why the run failed before its exit code could tell (timeout, overflow, ...)

    @property
    def ok(self) -> bool:
        return self.error is None and self.exit_code == 0

    def reason(self) -> str:
        """A one-line reason for a failed run, for logs and ``status``."""
        if self.error is not None:
            return self.error
        tail = self.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        return f"exit code {self.exit_code}" + (f": {tail[0][:200]}" if tail[0] else "")


def run_bounded(argv: Sequence[str], limits: Limits, env: Mapping[str, str] | None = None,
                cwd: str | None = None, stdin: bytes | None = None) -> ProcessResult:
    """Run ``argv`` to its end or to a bound; never raises for anything the program does."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env) if env is not None
                                else None, cwd=cwd, start_new_session=True, close_fds=True)
    except OSError as exc:
        return ProcessResult(None, b"", b"", time.monotonic() - start, f"cannot start {argv[0]}: {exc.strerror}")
    try:
        return _collect(proc, limits, stdin, start)
    finally:
        _kill_group(proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(KILL_GRACE_S)


def _collect(proc: subprocess.Popen[bytes], limits: Limits, stdin: bytes | None, start: float) -> ProcessResult:
    assert proc.stdout is not None and proc.stderr is not None
    if stdin is not None and proc.stdin is not None:
        _feed(proc, stdin)
    out, err = bytearray(), bytearray()
    caps = {proc.stdout.fileno(): (out, limits.max_stdout, "stdout"),
            proc.stderr.fileno(): (err, limits.max_stderr, "stderr")}
    deadline = start + limits.timeout_s
    error: str | None = None
    with selectors.DefaultSelector() as sel:
        for stream in (proc.stdout, proc.stderr):
            os.set_blocking(stream.fileno(), False)
            sel.register(stream.fileno(), selectors.EVENT_READ)
        while sel.get_map() and error is None:
            left = deadline - time.monotonic()
            if left <= 0:
                error = f"timed out after {limits.timeout_s:g}s"
                break
            for key, _ in sel.select(min(left, 0.5)):
                fd = int(key.fd)
                chunk = os.read(fd, 65536)
                if not chunk:
                    sel.unregister(fd)
                    continue
                buf, cap, what = caps[fd]
                buf += chunk
                if len(buf) > cap:
                    error = f"{what} over {cap} bytes"
                    break
    if error is None:
        try:
            code: int | None = proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            error, code = f"timed out after {limits.timeout_s:g}s", None
    else:
        code = None
    return ProcessResult(code, bytes(out[: limits.max_stdout]), bytes(err[: limits.max_stderr]),
                         time.monotonic() - start, error)


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    """Written from a thread, so a program that does not read its input cannot block us: killing its group
    closes the pipe and the writer ends with EPIPE."""
    pipe = proc.stdin
    assert pipe is not None

    def write() -> None:
        with contextlib.suppress(OSError):
            pipe.write(data)
        with contextlib.suppress(OSError):
            pipe.close()

    threading.Thread(target=write, name="stdin-feed", daemon=True).start()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
