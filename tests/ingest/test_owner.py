"""Who owns a loopback socket, read from the kernel's socket table: a real connection to a real listener
(``/proc/net/tcp`` of this machine), and the rows that must not match."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from collector.ingest.owner import listener_uid, peer_uid

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc/net/tcp")


def test_the_client_end_of_a_real_loopback_connection_is_ours() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname())
    accepted, peer = server.accept()
    try:
        port = server.getsockname()[1]
        assert listener_uid(port) == os.getuid()
        assert peer_uid(peer[1], port) == os.getuid()
        assert peer_uid(peer[1], port + 1 if port < 65535 else port - 1) is None  # another server's port
    finally:
        for s in (client, accepted, server):
            s.close()


def test_rows_that_are_not_an_established_client_end_do_not_match(tmp_path: Path) -> None:
    table = tmp_path / "tcp"
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    rows = [
        "   0: 0100007F:9C40 0100007F:1F90 0A 00000000:00000000 00:00000000 00000000  1000 0 1\n",  # listening
        "   1: 0100007F:9C41 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1001 0 2\n",  # ours
        "   2: 0100007F:9C42 0100007F:1F91 01 00000000:00000000 00:00000000 00000000  1002 0 3\n",  # other server
        "   3: garbage\n",
    ]
    table.write_text(header + "".join(rows))
    assert peer_uid(0x9C40, 0x1F90, (table,)) is None
    assert peer_uid(0x9C41, 0x1F90, (table,)) == 1001
    assert peer_uid(0x9C42, 0x1F90, (table,)) is None
    assert peer_uid(0x9C41, 0x1F90, (tmp_path / "missing",)) is None
