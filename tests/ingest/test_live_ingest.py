"""The live view inside the real Service: http hooks give the same entries as the spool, the session
status reaches the output and /v1/sessions."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from support import FIXTURES, assert_no_duplicates, assert_schema_valid, prepare_fixture, read_output

from collector.cli.daemon_parts import daemon_parts
from collector.config import load_config
from collector.daemon.service import Service
from collector.deploy import consent
from collector.ingest.live import IngestPart
from collector.ingest.secret import read_token
from collector.ingest.server import IngestServer
from collector.paths import Paths
from collector.pipeline.status import SessionStatusTracker

CASES = ["tool_then_answer", "two_turns_resume"]
TIMES = ("time_unix_nano", "observed_time_unix_nano")


def spool_lines(case: str) -> list[dict[str, Any]]:
    spool = FIXTURES / "claude-code" / case / "spool" / "claude-code"
    files = sorted(spool.glob("*.jsonl"))
    return [json.loads(line) for path in files for line in path.read_text().splitlines()]


def service_for(paths: Paths) -> Service:
    config = load_config(paths.config_file, env={})
    config.ingest.port = 0
    service = Service(paths, config, output_dir=paths.output_dir)
    service.startup()
    return service


async def post_all(port: int, agent: str, bodies: list[bytes], token: str) -> list[int]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    statuses = []
    for body in bodies:
        writer.write(f"POST /v1/hooks/{agent} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                     f"X-Agent-Collector-Token: {token}\r\n"
                     f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        statuses.append(int(head.split(b" ")[1]))
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
    writer.close()
    return statuses


async def get_json(port: int, path: str, token: str) -> Any:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Agent-Collector-Token: {token}\r\n"
                 "Connection: close\r\n\r\n".encode())
    data = await reader.read()
    writer.close()
    return orjson.loads(data.split(b"\r\n\r\n", 1)[1])


async def start_ingest(service: Service) -> tuple[IngestPart, IngestServer]:
    (part,) = [p for p in daemon_parts(service) if isinstance(p, IngestPart)]
    await part.start()
    assert part.server is not None, "ingest server did not start"
    return part, part.server


def hooks_only(tmp: Path, case: str) -> Paths:
    """The fixture's hook spool without its transcripts: a replay posts old payloads at a new time, so
    turn correlation against the transcript (by time) would differ for reasons that are not ingest's.
    Both paths share one content key, so their digests of the same content are equal too."""
    paths = prepare_fixture(FIXTURES / "claude-code" / case, tmp)
    paths.state_dir.mkdir(parents=True, exist_ok=True)
    (paths.state_dir / "content.key").write_text("ab" * 32)
    shutil.rmtree(paths.home)
    paths.home.mkdir()
    return paths


async def through_spool(tmp: Path, case: str) -> list[dict[str, Any]]:
    paths = hooks_only(tmp, case)
    service = service_for(paths)
    try:
        await service.collect_once()
    finally:
        service.shutdown()
    return read_output(paths.output_dir)


async def through_http(tmp: Path, case: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    paths = hooks_only(tmp, case)
    shutil.rmtree(paths.spool_dir)  # the hooks arrive over http instead
    service = service_for(paths)
    part, server = await start_ingest(service)
    try:
        bodies = [orjson.dumps(line["payload"]) for line in spool_lines(case)]
        token = read_token(paths)
        assert token is not None and token == server.config.token, "the daemon made the user's secret"
        assert set(await post_all(server.port, "claude-code", bodies, token)) == {200}
        assert part.relay is not None
        part.relay.flush()
        await service.collect_once()
        sessions = await get_json(server.port, "/v1/sessions", token)
    finally:
        await part.stop()
        service.shutdown()
    return read_output(paths.output_dir), sessions


def without_times(entries: list[dict[str, Any]]) -> list[str]:
    """Entries as comparable text, without receive times and without the ids of hook-only events (a hook
    call with no native id is identified by its payload and its receive time, which differ per path)."""
    def key(e: dict[str, Any]) -> str:
        keep = {k: v for k, v in e.items() if k not in TIMES}
        if e["event.name"] in ("session.start", "session.end", "session.status"):
            keep.pop("event.id")
        return orjson.dumps(keep, option=orjson.OPT_SORT_KEYS).decode()
    return sorted(key(e) for e in entries)


@pytest.mark.parametrize("case", CASES)
async def test_http_hooks_give_the_same_entries_as_the_spool(tmp_path: Path, case: str) -> None:
    spooled = await through_spool(tmp_path / "spool", case)
    posted, _ = await through_http(tmp_path / "http", case)
    assert_schema_valid(posted)
    assert_no_duplicates(posted)
    names = {e["event.name"] for e in posted}
    assert {"session.start", "user.prompt", "tool.call", "tool.result", "session.end"} <= names
    # The same entries, field for field; only the receive times differ (the spool carries the hook's own),
    # and with them the ids of hook-only events. Prompts, tool calls and results keep the agent's own ids.
    assert without_times(posted) == without_times(spooled)
    native = {e["event.id"] for e in posted if e["event.name"] in ("user.prompt", "tool.call", "tool.result")}
    assert native == {e["event.id"] for e in spooled if e["event.name"] in ("user.prompt", "tool.call", "tool.result")}


def statuses_of(entries: list[dict[str, Any]]) -> list[str]:
    return [e["session.status"] for e in sorted(entries, key=lambda e: e["time_unix_nano"])
            if e["event.name"] == "session.status"]


async def test_http_session_status_reaches_output_and_sessions_view(tmp_path: Path) -> None:
    posted, sessions = await through_http(tmp_path, "tool_then_answer")
    statuses = statuses_of(posted)
    assert statuses[:2] == ["idle", "running"]
    assert statuses[-1] == "closed"
    (row,) = sessions["sessions"]
    assert row["agent"] == "claude-code" and row["status"] == "closed"
    assert row["session_id"] == "3717dcf6-6ccc-43e1-999e-09b113fae890"
    assert row["tool_calls_today"] >= 0 and row["input_tokens_today"] >= 0


def test_the_run_command_adds_the_ingest_and_the_pipeline_has_the_tracker(tmp_path: Path) -> None:
    paths = prepare_fixture(FIXTURES / "claude-code" / "tool_then_answer", tmp_path)
    service = service_for(paths)
    try:
        assert isinstance(service.status, SessionStatusTracker)
        # auto-deploy only once the user installed (or ran `run --deploy`): a checkout's `run` deploys nothing
        assert [p.name for p in daemon_parts(service)] == ["ingest", "watchdog"]
        consent.give(service.paths, "a test")
        assert [p.name for p in daemon_parts(service)] == ["ingest", "autodeploy", "watchdog"]
        service.config.ingest.enabled = False
        service.config.deploy.auto = False
        assert [p.name for p in daemon_parts(service)] == ["watchdog"]
    finally:
        service.shutdown()


async def test_stop_without_an_entry_still_moves_the_status(tmp_path: Path) -> None:
    posted, _ = await through_http(tmp_path, "tool_then_answer")
    assert statuses_of(posted) == ["idle", "running", "ready_for_review", "closed"]
