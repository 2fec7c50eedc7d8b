"""Waiting in tests: poll a condition until it holds or its bound passes, and a free loopback port."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float, what: str = "the condition", interval: float = 0.05,
             ignore: tuple[type[BaseException], ...] = ()) -> T:
    """Call ``check`` every ``interval`` seconds until it returns something true and return that; fail
    the test if ``timeout`` seconds pass first. Exceptions of the ``ignore`` types count as not yet."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(*ignore):
            value = check()
            if value:
                return value
        assert time.monotonic() < deadline, f"{what} did not hold within {timeout}s"
        time.sleep(interval)


def free_port() -> int:
    """A loopback TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, timeout: float = 20) -> None:
    """Until something accepts connections on the loopback ``port``."""
    def accepts() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_for(accepts, timeout, f"a listener on port {port}")
