"""One collector per data directory: ``<state dir>/collector.lock``, held while a Service runs."""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass

from collector.paths import Paths
from collector.util.private import open_private, private_dir


class AlreadyRunning(Exception):
    pass


@dataclass(slots=True)
class InstanceLock:
    """Owns the lock file's descriptor: an exclusive ``flock`` with the holder's pid written in the file,
    so that a second collector on the same data directory is refused and told who holds it."""

    paths: Paths
    fd: int | None = None

    def take(self) -> None:
        """AlreadyRunning when another process holds it."""
        private_dir(self.paths.state_dir)
        fd = open_private(self.paths.state_dir / "collector.lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise AlreadyRunning(f"another agent-collector{holder} is using {self.paths.data_dir}: if it is the "
                                 "installed service, `agent-collector service status` shows it and `agent-collector "
                                 "service stop` stops it") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _lock_holder(fd: int) -> str:
    """`` (pid N)`` from the lock file the running collector wrote, or nothing if it cannot be read."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {int(text)})" if text.isdigit() else ""
