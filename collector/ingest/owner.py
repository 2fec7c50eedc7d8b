"""Who listens on a loopback port: read from ``/proc/net/tcp`` and ``/proc/net/tcp6`` (Linux), where the
kernel lists every socket with its owner's uid. A client of ours sends the ingest token only to a
listener its own user owns (another local user could bind the port while our daemon restarts), and the
daemon names the owner of a port it finds taken.

Where there is no ``/proc/net`` (macOS, BSD) the owner cannot be read: :func:`listener_uid` says None and
the caller decides (our clients then send, as before; the hooks never use the network at all)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

LISTEN = "0A"
TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
# local addresses a 127.0.0.1 client reaches: 127.0.0.1, 0.0.0.0, ::, ::ffff:127.0.0.1, ::ffff:0.0.0.0
_REACHING = {"0100007F", "00000000", "00000000000000000000000000000000",
             "0000000000000000FFFF00000100007F", "0000000000000000FFFF000000000000"}


def listener_uid(port: int, tables: tuple[Path, ...] = TABLES) -> int | None:
    """The uid owning the socket that listens on ``port`` for 127.0.0.1; None: none listens, or the
    tables cannot be read."""
    want = f"{port:04X}"
    for fields in _rows(tables, LISTEN):
        address, _, hex_port = fields[1].partition(":")
        if hex_port == want and address in _REACHING:
            return int(fields[7])
    return None


def _rows(tables: tuple[Path, ...], state: str) -> Iterator[list[str]]:
    """The fields of each socket row in ``state`` whose uid column is a number (tables that cannot be read
    are passed over)."""
    for table in tables:
        try:
            lines = table.read_text(errors="replace").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) >= 8 and fields[3] == state and fields[7].isdigit():
                yield fields


@dataclass(frozen=True, slots=True)
class Owner:
    uid: int | None  # None: not known (no /proc/net) or nobody listens
    known: bool  # the tables could be read

    @property
    def ours(self) -> bool:
        return self.uid is None or self.uid == os.getuid()


def port_owner(port: int, tables: tuple[Path, ...] = TABLES) -> Owner:
    known = any(table.exists() for table in tables)
    return Owner(listener_uid(port, tables) if known else None, known)


def refuse_reason(port: int, tables: tuple[Path, ...] = TABLES) -> str | None:
    """Why a client must not send the token to 127.0.0.1:``port`` (another user listens there), or None."""
    owner = port_owner(port, tables)
    if owner.ours:
        return None
    return (f"127.0.0.1:{port} is held by another user (uid {owner.uid}), not by your daemon: nothing was sent "
            f"to it; `agent-collector status` shows the port your daemon listens on")


ESTABLISHED = "01"


def peer_uid(peer_port: int, server_port: int, tables: tuple[Path, ...] = TABLES) -> int | None:
    """The uid owning the client socket of a loopback connection to our ``server_port`` from
    ``peer_port`` (its row: local ``127.0.0.1:peer_port``, remote ``:server_port``, established); None:
    not found or the tables cannot be read. The OTLP receiver takes an agent's telemetry without the
    token from a client of our own user (docs/otlp-receiver.md, "Who may post")."""
    local, remote = f"{peer_port:04X}", f"{server_port:04X}"
    for fields in _rows(tables, ESTABLISHED):
        if fields[1].rpartition(":")[2] == local and fields[2].rpartition(":")[2] == remote:
            return int(fields[7])
    return None
