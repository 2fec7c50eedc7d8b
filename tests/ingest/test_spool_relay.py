"""The ingest acknowledges only what is durable: a hook is answered once its line is written and
fdatasynced (group commit: the lines that arrived together share one fdatasync); a failed write is a 500,
logged and counted, and the relay goes on; a writer thread that died is restarted; a payload that cannot
be stored fails alone, its neighbours are all kept."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from collector.ingest.live import IngestPart
from collector.ingest.relay import SpoolRelay, SpoolWriteFailed
from collector.ingest.server import IngestConfig
from collector.sources.spool_writer import SpoolWriter

TOKEN = "a1" * 32


class GatedWriter(SpoolWriter):
    """A real SpoolWriter whose group commits can be held, counted and made to fail."""

    def __init__(self, spool: Path) -> None:
        super().__init__(spool)
        self.gate = threading.Event()
        self.gate.set()
        self.calls: list[int] = []
        self.fail_with: BaseException | None = None

    def write_lines(self, lines: Sequence[tuple[str, bytes]]) -> None:
        self.gate.wait(10)
        self.calls.append(len(lines))
        if self.fail_with is not None:
            error, self.fail_with = self.fail_with, None
            raise error
        super().write_lines(lines)


def spooled(spool: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(spool.rglob("*.jsonl")) for line in path.read_text().splitlines()]


async def test_answered_only_after_the_line_is_on_disk_and_grouped(tmp_path: Path) -> None:
    writer = GatedWriter(tmp_path / "spool")
    relay = SpoolRelay(writer)
    writer.gate.clear()  # the disk is slow: the first commit is held
    first = relay.submit("codex", "a", {"n": 0}, 1.0)
    await asyncio.sleep(0.05)
    rest = [relay.submit("codex", "a", {"n": i}, 1.0) for i in range(1, 51)]  # arrive during the first
    await asyncio.sleep(0.05)
    assert not first.done() and not any(f.done() for f in rest), "no answer before the line is durable"
    assert spooled(tmp_path / "spool") == []
    writer.gate.set()
    await asyncio.wait_for(asyncio.gather(first, *rest), 5)
    assert [e["payload"]["n"] for e in spooled(tmp_path / "spool")] == list(range(51)), "in arrival order"
    assert writer.calls == [1, 50], "the 50 that arrived together share one write and one fdatasync"
    assert relay.stats()["group_commits"] == 2 and relay.stats()["written"] == 51
    relay.close()
    writer.close()


async def test_a_failed_write_fails_its_requests_and_the_relay_goes_on(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    writer = GatedWriter(tmp_path / "spool")
    relay = SpoolRelay(writer)
    writer.fail_with = OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(SpoolWriteFailed, match="No space left"):
        await asyncio.wait_for(relay.submit("codex", "a", {"n": 1}, 1.0), 5)
    await asyncio.wait_for(relay.submit("codex", "a", {"n": 2}, 1.0), 5)
    assert [e["payload"]["n"] for e in spooled(tmp_path / "spool")] == [2]
    assert relay.stats()["failed"] == 1 and relay.stats()["written"] == 1
    assert "cannot append 1 posted hook(s) to the spool" in caplog.text
    relay.close()
    writer.close()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
async def test_a_dead_writer_thread_is_restarted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    writer = GatedWriter(tmp_path / "spool")
    relay = SpoolRelay(writer)
    writer.fail_with = SystemExit("the thread ends")  # not an Exception: it ends the writer thread
    with pytest.raises(SpoolWriteFailed):
        await asyncio.wait_for(relay.submit("codex", "a", {"n": 1}, 1.0), 5)
    for _ in range(100):
        if not relay._thread.is_alive():
            break
        await asyncio.sleep(0.01)
    await asyncio.wait_for(relay.submit("codex", "a", {"n": 2}, 1.0), 5)
    assert relay.stats()["writer_restarts"] == 1 and "restarted it" in caplog.text
    assert [e["payload"]["n"] for e in spooled(tmp_path / "spool")] == [2]
    relay.close()
    writer.close()


def test_a_failed_write_leaves_no_torn_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills halfway through a group's write: what it wrote is cut back, whole lines only."""
    writer = SpoolWriter(tmp_path / "spool")
    writer.append("codex", "a", {"n": 1}, 1.0)
    real = os.write
    calls: list[int] = []

    def fills_up(fd: int, data: Any) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real(fd, bytes(data[: len(data) // 2]))  # a short write: half of it went
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", fills_up)
    with pytest.raises(OSError):
        writer.write_lines([("codex", SpoolWriter.line("codex", "a", {"n": n}, 1.0)) for n in (2, 3)])
    monkeypatch.setattr(os, "write", real)
    assert len(calls) == 2, "the short write was continued"
    writer.append("codex", "a", {"n": 4}, 1.0)
    writer.close()
    assert [e["payload"]["n"] for e in spooled(tmp_path / "spool")] == [1, 4], "whole lines only"


def test_the_daemons_spool_file_is_written_synchronously(tmp_path: Path) -> None:
    """Durable on return: the http spool file is opened O_DSYNC (a write returns once its data is on
    disk), unless the writer was made without fsync."""
    import fcntl

    for fsync, expected in ((True, os.O_DSYNC), (False, 0)):
        writer = SpoolWriter(tmp_path / f"spool-{fsync}", fsync=fsync)
        writer.append("codex", "a", {"n": 1}, 1.0)
        fd = writer._fds["codex"][1]
        assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DSYNC == expected
        writer.close()


def _deep(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"session_id": "s", "hook_event_name": "Stop"}
    inner = node
    for _ in range(depth):
        inner["x"] = {}
        inner = inner["x"]
    return node


async def _post(port: int, body: bytes) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"POST /v1/hooks/claude-code HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Agent-Collector-Token: {TOKEN}"
                 f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    writer.close()
    return int(head.split(b" ")[1])


async def test_the_server_answers_400_500_200_and_neighbours_are_kept(tmp_path: Path) -> None:
    """A body nested 300 deep (once fatal to the writer thread) is refused alone; 100 hooks after it
    are all on disk when answered; a failed write is a 500, counted."""
    writer = GatedWriter(tmp_path / "spool")
    part = IngestPart(IngestConfig(token=TOKEN, port=0), writer, lambda: {"claude-code"}, dict)
    await part.start()
    assert part.server is not None
    port = part.server.port
    try:
        assert await _post(port, json.dumps(_deep(300)).encode()) == 400
        bodies = [orjson.dumps({"session_id": "s", "hook_event_name": "Notification", "n": i}) for i in range(100)]
        assert await asyncio.gather(*(_post(port, b) for b in bodies)) == [200] * 100
        assert sorted(e["payload"]["n"] for e in spooled(tmp_path / "spool")) == list(range(100))
        writer.fail_with = OSError(errno.EIO, "Input/output error")
        assert await _post(port, bodies[0]) == 500
        assert await _post(port, bodies[1]) == 200
        requests = part.server.stats()["requests"]
        assert requests["rejected_400"] == 1 and requests["rejected_500"] == 1 and requests["accepted"] == 101
    finally:
        await part.stop()
        writer.close()
