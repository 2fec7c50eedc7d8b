"""A test's own child process, ended the way the service manager would end it: SIGTERM, then SIGKILL if it is
still there after ``timeout`` seconds (no test leaves a process behind)."""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def stop_gently(proc: subprocess.Popen[Any], timeout: float = 20) -> int | None:
    """SIGTERM and wait; killed when it has not gone within ``timeout``. Its exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
    return proc.returncode
