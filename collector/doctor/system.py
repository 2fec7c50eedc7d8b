"""Collector-wide checks: configuration, daemon, ingest, disk, backlog, clock and time zone."""

from __future__ import annotations

import http.client
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from collector import __version__
from collector.doctor.model import Finding, error, ok, warn
from collector.paths import Paths

MIN_FREE_BYTES = 500 * 1024 * 1024
LOW_FREE_BYTES = 2 * 1024 * 1024 * 1024
BACKLOG_WARN = 10_000
CLOCK_SKEW_S = 300
START = "start it: `agent-collector service start` (the user service), or `agent-collector run` in a terminal"


def check_config(paths: Paths) -> tuple[Finding, Any]:
    from collector.config import ConfigError, load_config

    try:
        config = load_config(paths.config_file)
    except ConfigError as exc:
        return error("config", str(exc), f"fix {paths.config_file} (or the AGENT_COLLECTOR_* variable named); "
                     "`agent-collector config check` says when it is right"), None
    where = str(paths.config_file) if paths.config_file.exists() else "defaults (no config file)"
    return ok("config", f"configuration valid: {where}"), config


def check_daemon(paths: Paths, pid: int | None, status: dict[str, Any]) -> Finding:
    if pid is None:
        return error("daemon", "the collector daemon is not running: hooks that post to it are lost and "
                     "nothing is collected until it runs", START)
    running = status.get("version")
    if running and running != __version__:
        return warn("daemon", f"daemon pid {pid} runs agent-collector {running}, the installed one is {__version__}",
                    "restart it: `agent-collector service restart`")
    return ok("daemon", f"running, pid {pid}, agent-collector {running or __version__}")


def ingest_port(paths: Paths, config: Any) -> int:
    """The port in effect: the configured one, else (0: chosen per user) the one the daemon recorded in
    ``ingest.port`` at start-up, else the one that would be chosen (``collector.ingest.secret``)."""
    from collector.ingest.secret import daemon_port

    return daemon_port(paths, int(config.ingest.port) if config is not None else 0)


def ingest_token(paths: Paths) -> str | None:
    from collector.ingest.secret import read_token

    return read_token(paths)


def check_ingest(paths: Paths, config: Any, pid: int | None,
                 probe: Callable[[int, str | None], int] | None = None) -> Finding | None:
    if config is not None and not config.ingest.enabled:
        return ok("ingest", "ingest disabled in the configuration (http hooks are not used)")
    if pid is None:
        return None  # the daemon finding says it all
    from collector.ingest import port_moves
    from collector.ingest.owner import refuse_reason

    port = ingest_port(paths, config)
    refused = refuse_reason(port)
    if refused:
        return error("ingest", refused, "restart the daemon (`agent-collector service restart`): it moves to a "
                     "free port when its own is held")
    moved = port_moves.read(paths)
    try:
        code = (probe or _probe)(port, ingest_token(paths))
    except OSError as exc:
        return error("ingest", f"nothing answers on 127.0.0.1:{port} ({exc.strerror or exc}): http hooks fail",
                     "restart the daemon (`agent-collector service restart`); if another program holds the "
                     "port, set [ingest] port in the config and run `agent-collector install` again")
    if code != 200:
        return error("ingest", f"127.0.0.1:{port}/v1/status answered HTTP {code}",
                     "restart the daemon; `agent-collector install` redeploys the hooks with the current port")
    if moved is not None and moved.get("port") == port:
        return warn("ingest", f"reachable on 127.0.0.1:{port}; {port_moves.describe(moved)}",
                    "nothing to do for the hooks; to get the port back, stop what holds it and restart the daemon")
    return ok("ingest", f"reachable on 127.0.0.1:{port}")


def _probe(port: int, token: str | None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        headers = {"X-Agent-Collector-Token": token} if token else {}
        conn.request("GET", "/v1/status", headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


def check_disk(paths: Paths, usage: Callable[[Path], Any] = shutil.disk_usage) -> Finding:
    target = paths.data_dir if paths.data_dir.exists() else paths.data_dir.parent
    while not target.exists() and target != target.parent:
        target = target.parent
    free = usage(target).free
    text = f"{free / 2**30:.1f} GiB free under {target}"
    if free < MIN_FREE_BYTES:
        return error("disk", text, "free disk space: exports stop and retry while the disk is full")
    if free < LOW_FREE_BYTES:
        return warn("disk", text, "free disk space soon; `[retention]` / `[store] retention_days` bound our files")
    return ok("disk", text)


def check_backlog(status: dict[str, Any]) -> Finding:
    queued = {name: int(stats.get("queued", 0) or 0) for name, stats in (status.get("exporters") or {}).items()
              if isinstance(stats, dict)}
    big = {n: q for n, q in queued.items() if q >= BACKLOG_WARN}
    if big:
        names = ", ".join(f"{n}: {q}" for n, q in sorted(big.items()))
        return warn("backlog", f"exporter queues are backing up ({names})",
                    "check that the OTLP backend is up (`agent-collector status` shows the last error)")
    return ok("backlog", f"exporter queues: {sum(queued.values())} entries waiting")


def check_clock(newest_ns: int | None, now: float | None = None) -> Finding:
    from collector.util.timezones import local_zone

    now = time.time() if now is None else now
    _, zone = local_zone()
    tz_env = os.environ.get("TZ", "").lstrip(":")
    if tz_env and zone != tz_env:
        return warn("clock", f"TZ={tz_env!r} is not a known time zone; days are counted in {zone}",
                    "set TZ to an IANA name (e.g. Europe/Berlin) or unset it")
    if newest_ns is not None and newest_ns / 1e9 > now + CLOCK_SKEW_S:
        ahead = newest_ns / 1e9 - now
        return warn("clock", f"the newest recorded event is {ahead / 60:.0f} min in the future: this clock (or "
                    "the agent's) is off", "set the clock right (e.g. `timedatectl set-ntp true`)")
    return ok("clock", f"clock plausible; time zone {zone}")


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}
