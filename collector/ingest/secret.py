"""The ingest's per-user secret and port, so two users (or two homes) on one machine never share an ingest.

* ``<state dir>/ingest.token``: 32 random bytes, hex, 0600, made by ``install`` or the first start. Every
  request to the ingest carries it in ``X-Agent-Collector-Token``; the server compares in constant time.
* ``<state dir>/ingest.header``: the same secret as a ready header line (0600), for ``curl -H @file``:
  the shell relay never puts the secret on a command line another user could read in ``ps``.
* ``<state dir>/ingest.port``: the port in effect. ``ingest.port = 0`` (the default) means "chosen per
  user": the first free port of 4320-5319, starting at an offset from the user id, kept here once chosen
  and written into the integrations by ``install``. A non-zero ``ingest.port`` is used as it is.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import socket
from collections.abc import Callable
from pathlib import Path

from collector.ingest.server import TOKEN_HEADER
from collector.paths import Paths
from collector.util.private import FILE_MODE, open_private, private_dir

HEADER = TOKEN_HEADER
PORT_RANGE = range(4320, 5320)


def _read(path: Path) -> str | None:
    try:
        fd = open_private(path, os.O_RDONLY)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read(4096).decode("ascii", "replace").strip() or None


def _write_new(path: Path, text: str) -> bool:
    """Create ``path`` 0600 with ``text``; False when it exists already (another process won the race)."""
    private_dir(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), FILE_MODE)
        f.write(text.encode("ascii"))
        f.flush()
        os.fsync(f.fileno())
    return True


def _replace(path: Path, text: str) -> None:
    from collector.util.atomic import atomic_write

    atomic_write(path, text.encode("ascii"), mode=FILE_MODE)


def read_token(paths: Paths) -> str | None:
    return _read(paths.ingest_token_file)


def ensure_token(paths: Paths) -> str:
    """The user's ingest secret, made now if there is none; the header file is kept in step."""
    token = read_token(paths)
    if token is None:
        _write_new(paths.ingest_token_file, secrets.token_hex(32) + "\n")
        token = read_token(paths)
        if token is None:
            raise OSError(f"cannot create {paths.ingest_token_file}")
    line = f"{HEADER}: {token}"
    if _read(paths.ingest_header_file) != line:
        _replace(paths.ingest_header_file, line + "\n")
    return token


def token_matches(expected: str | None, given: str | None) -> bool:
    """Constant-time comparison (the time does not tell how many characters were right); no secret, or
    an empty one, never matches."""
    return bool(expected) and bool(given) and hmac.compare_digest(str(expected).encode(), str(given).strip().encode())


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def recorded_port(paths: Paths) -> int | None:
    text = _read(paths.ingest_port_file)
    if text is None or not text.isdigit() or not 0 < int(text) < 65536:
        return None
    return int(text)


def record_port(paths: Paths, port: int) -> None:
    if recorded_port(paths) != port:
        _replace(paths.ingest_port_file, f"{port}\n")


def choose_port(is_free: Callable[[int], bool] = port_is_free, uid: int | None = None) -> int:
    """The first free port of :data:`PORT_RANGE`, starting at an offset from the user id (so users on one
    machine start from different ports), else any free port the system gives."""
    start = (os.getuid() if uid is None else uid) % len(PORT_RANGE)
    for index in range(len(PORT_RANGE)):
        port = PORT_RANGE[(start + index) % len(PORT_RANGE)]
        if is_free(port):
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ingest_port(paths: Paths, configured: int, record: bool = False) -> int:
    """The port the daemon listens on and the integrations post to: the configured one, else the one
    chosen for this user before, else a newly chosen one (kept in ingest.port when ``record``; a dry run
    or a status check does not record it)."""
    if configured:
        return configured
    recorded = recorded_port(paths)
    if recorded is not None:
        return recorded
    port = choose_port()
    if record:
        with contextlib.suppress(OSError):
            record_port(paths, port)
    return port


def daemon_port(paths: Paths, configured: int) -> int:
    """Where a client finds the daemon: the port it recorded when it started listening (it may have moved
    off a port another program held, or the configuration changed since it started), else the configured
    one, else the one that would be chosen."""
    return recorded_port(paths) or ingest_port(paths, configured)
