"""``agent-collector status``: the daemon, each agent, each source, each exporter."""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from typing import Any

import orjson  # noqa: F401 - read_status

from collector.cli.common import add_home, add_json, checked_config, paths_from, print_json, print_table
from collector.cli.health import print_external, print_polled
from collector.daemon.plugins import load_agents
from collector.paths import Paths
from collector.sources.spool_lines import DROPPED, PAYLOAD_INVALID
from collector.state.checkpoints import CHECKPOINTS_FILE, read_saved


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("status", help="service state, agents, sources and exporters",
                                   description="Reads the status the daemon (or the last collect) wrote.")
    add_home(parser)
    add_json(parser)
    parser.set_defaults(func=cmd_status)


def _daemon_pid(paths: Paths) -> int | None:
    try:
        pid = int((paths.state_dir / "collector.lock").read_text().strip() or 0)
    except (OSError, ValueError):
        return None
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid if _holds_lock(paths) else None


def _holds_lock(paths: Paths) -> bool:
    import fcntl

    try:
        fd = os.open(paths.state_dir / "collector.lock", os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def read_status(paths: Paths) -> dict[str, Any]:
    status: dict[str, Any] = {}
    with contextlib.suppress(OSError, orjson.JSONDecodeError):
        status = orjson.loads((paths.state_dir / "status.json").read_bytes())
    pid = _daemon_pid(paths)
    status["service"] = {"running": pid is not None, "pid": pid}
    from collector.deploy import autodeploy, watchdog

    status.update(read_saved(paths.state_dir / CHECKPOINTS_FILE, (watchdog.STATE_KEY, autodeploy.STATE_KEY)))
    from collector.ingest import port_moves

    moved = port_moves.read(paths)
    if moved is not None:
        status["ingest_moved"] = moved
    return status


def _agents_here(paths: Paths, status: dict[str, Any]) -> None:
    """Detection and integration state are read now, from this machine, not from the daemon's report."""
    from collector.definitions import detect
    from collector.deploy import integration_state

    agents = status.setdefault("agents", {})
    for agent_id, defn in load_agents(paths.agents_override_dir).agents.items():
        row = agents.setdefault(agent_id, {})
        row["detected"] = "yes" if detect(defn, paths).installed else "no"
        try:
            states = integration_state(defn, paths)
        except Exception as exc:  # noqa: BLE001 - one agent's unreadable config must not hide the rest
            row["integration"] = f"error: {exc}"
            continue
        row["integration"] = "; ".join(s.summary for s in states) or "none (polling)"


def _service_here(paths: Paths, status: dict[str, Any]) -> int:
    """The installed service's mode and, when it is down, why; exit status 3 when it should run and does not."""
    from collector.deploy.service_ctl import ServiceControl, down_reason, installed_mode

    svc = status["service"]
    svc["mode"] = installed_mode(paths)
    if svc["running"] or svc["mode"] is None:
        return 0
    svc["reason"] = down_reason(ServiceControl(svc["mode"], paths))
    return 3


def cmd_status(args: argparse.Namespace) -> int:
    paths = paths_from(args)
    checked_config(paths)
    status = read_status(paths)
    _agents_here(paths, status)
    code = _service_here(paths, status)
    if args.json:
        print_json(status)
        return code
    _print_service(status["service"])
    if "updated" in status:
        print(f"status written {time.time() - status['updated']:.0f}s ago; output: {status.get('output_dir')}")
    _print_delivery(status.get("delivery") or {})
    agents = status.get("agents", {})
    if agents:
        print()
        print_table(("AGENT", "DETECTED", "INTEGRATION", "EVENTS TODAY", "LAST EVENT"),
                    [(a, v.get("detected", "-"), v.get("integration", "-"), v.get("events_today", 0),
                      _ago(v.get("last_event_ns"))) for a, v in sorted(agents.items())])
    sources = status.get("sources", {})
    if sources:
        print()
        print_table(("SOURCE", "RECORDS", "FILES", "LAG BYTES", "MALFORMED", "OVERSIZED", "ERRORS"),
                    [(n, s.get("records"), s.get("files"), s.get("lag_bytes", "-"), s.get("malformed"),
                      s.get("oversized"), s.get("errors")) for n, s in sorted(sources.items())])
        for n, s in sorted(sources.items()):  # what the hook gave up on, or could not make JSON of
            odd = [f"{k}={s[k]}" for k in (DROPPED, PAYLOAD_INVALID) if s.get(k)]
            if odd:
                print(f"{n}: {', '.join(odd)}")
        print_polled(sources)
    missing = (status.get("pipeline") or {}).get("without_model") or {}
    if missing:  # a parser gap: the agent's records named no model for these calls
        print("model calls whose agent record named no model (priced by the session's model if any): "
              + ", ".join(f"{a}={n}" for a, n in sorted(missing.items())))
    replaced = (status.get("pipeline") or {}).get("times_replaced") or {}
    if replaced:  # a wrong clock or unit in the agent's records
        print("entries whose time was implausible and now carry the time they were read: "
              + ", ".join(f"{a}={n}" for a, n in sorted(replaced.items())))
    lost = (status.get("pipeline") or {}).get("unreadable") or {}
    if lost:  # parts of records of a shape the parser cannot read: left out, so counted with their cause
        print("record parts left out (a field of an unreadable shape): "
              + ", ".join(f"{k} ({n})" for k, n in sorted(lost.items())))
    refused = (status.get("pipeline") or {}).get("attributes_left_out") or {}
    if refused:  # custom or per-invocation attributes (or a TRACEPARENT) that could not be used
        print("custom attributes left out: " + ", ".join(f"{k} ({n})" for k, n in sorted(refused.items())))
    cut = (status.get("pipeline") or {}).get("truncated") or {}
    if cut:  # records nested deeper than the boundary reads: their deepest values left out, the rest read
        print("records read with their values below depth 64 left out: "
              + ", ".join(f"{a}={n}" for a, n in sorted(cut.items())))
    print_external(status.get("external_agents"))
    _print_budget(status.get("budget"))
    exporters = status.get("exporters", {})
    if exporters:
        print()
        print_table(("EXPORTER", "STATS"),
                    [(n, ", ".join(f"{k}={v}" for k, v in s.items())) for n, s in sorted(exporters.items())])
    rebuilt = ((exporters.get("usage_store") or {}) if isinstance(exporters, dict) else {}).get("rebuilt")
    if isinstance(rebuilt, dict):
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(rebuilt.get("at") or 0)))
        print(f"\nusage store rebuilt from the JSONL output at {when} ({rebuilt.get('reason')}): "
              f"{rebuilt.get('entries')} entries from {rebuilt.get('files')} files, "
              f"{rebuilt.get('first_day')} .. {rebuilt.get('last_day')}")
    _print_quarantine(status.get("quarantine") or {})
    if "watchdog" in status:
        print()
        _print_watchdog(status["watchdog"])
    if "autodeploy" in status:
        _print_autodeploy(status["autodeploy"])
    if "ingest_moved" in status:
        from collector.ingest import port_moves

        print(f"\nWARNING: {port_moves.describe(status['ingest_moved'])}")
    return code


def _print_autodeploy(auto: dict[str, Any]) -> None:
    print(f"auto-deploy: {auto.get('scans', 0)} detections (at least every {auto.get('rescan_s', '?')}s), "
          f"last {_ago_unix(auto.get('last_scan_unix'))}, {auto.get('errors', 0)} errors")
    for entry in auto.get("deployed") or []:
        outcome = "deployed" if entry.get("ok") else "FAILED"
        print(f"  {entry.get('agent')}: {outcome} {_ago_unix(entry.get('at_unix'))}: "
              f"{'; '.join(entry.get('changes') or [])}")


def _print_service(svc: dict[str, Any]) -> None:
    mode = f" ({svc['mode']} service)" if svc.get("mode") else ""
    if svc["running"]:
        print(f"service: running, pid {svc['pid']}{mode}")
        return
    if not svc.get("mode"):
        print("service: not running (no service installed; `agent-collector run` runs the daemon)")
        return
    print(f"service: NOT RUNNING{mode}; `agent-collector service start` starts it")
    for line in svc.get("reason", []):
        print(f"    {line}")


def _print_budget(budget: Any) -> None:
    """The limits at warn or over (docs/budgets.md); nothing when none is configured."""
    if not isinstance(budget, dict) or not budget.get("limits"):
        return
    marks = []
    for c in budget.get("crossed") or []:
        if isinstance(c, dict):
            over = c.get("level") == "over"
            marks.append(f"{'OVER' if over else 'warn'} {c.get('name')} {float(c.get('fraction') or 0):.0%}"
                         + (" (hard: prompts refused)" if over and c.get("hard") else ""))
    marks_text = ", ".join(marks)
    print(f"budget: {budget['limits']} limits" + (f"; {marks_text}" if marks else ", none reached"))


def _print_watchdog(watchdog: dict[str, Any]) -> None:
    print(f"watchdog: {watchdog.get('watched_files', 0)} files watched, {watchdog.get('repairs_today', 0)} "
          f"repairs today (cap {watchdog.get('daily_cap', '?')}), {watchdog.get('repairs_total', 0)} in all, "
          f"{watchdog.get('errors', 0)} errors")
    last = watchdog.get("last_repair") or {}
    if last:
        print(f"  last repair: {last.get('agent')} {last.get('file')} {_ago_unix(last.get('at_unix'))} "
              f"({last.get('reason')})")
    for file, watch in sorted((watchdog.get("files") or {}).items()):
        if watch.get("capped"):
            print(f"  {file}: daily cap reached, no more repairs today: {watch.get('note', '')}")
        elif watch.get("conflict"):
            print(f"  {file}: conflict: {watch.get('note', '')}")


def _ago_unix(at: float | None) -> str:
    return _ago(int(at * 1e9)) if at else "-"


def _print_delivery(delivery: dict[str, Any]) -> None:
    blocked = delivery.get("blocked")
    if blocked:
        print(f"delivery: BLOCKED for {time.time() - blocked['since']:.0f}s: {blocked['by']} refuses "
              f"({blocked['error']}); {blocked['entries_waiting']} entries wait, nothing newer is read and "
              "no position moves until it accepts (a full disk: free some space)")
    for name, count in sorted((delivery.get("rejected") or {}).items()):
        print(f"delivery: {name} refused {count} entries for good (see the log)")


def _print_quarantine(quarantine: dict[str, Any]) -> None:
    rows = [(source, why, n) for source, reasons in sorted(quarantine.get("by_source", {}).items())
            for why, n in sorted(reasons.items())]
    if rows:
        print()
        print_table(("QUARANTINED FROM", "STAGE: REASON", "RECORDS"), rows)
        print("(agent-collector quarantine list | retry)")


def _ago(ns: int | None) -> str:
    if not ns:
        return "-"
    seconds = time.time() - ns / 1e9
    return f"{seconds:.0f}s ago" if seconds < 3600 else time.strftime("%Y-%m-%d %H:%M", time.localtime(ns / 1e9))
