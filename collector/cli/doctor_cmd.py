"""``agent-collector doctor``: check the collector and every detected agent's integration; one line per
finding with the fix; exit status 1 when something is wrong."""

from __future__ import annotations

import argparse
import sqlite3
import sys
from typing import Any

from collector.cli.common import add_home, add_json, paths_from, print_json
from collector.doctor.agents import check_agents, summary
from collector.doctor.budgets import check_budget
from collector.doctor.model import Finding, Level
from collector.doctor.system import (
    check_backlog,
    check_clock,
    check_config,
    check_daemon,
    check_disk,
    check_ingest,
    read_json,
)
from collector.paths import Paths

MARK = {Level.OK: "ok", Level.WARN: "WARN", Level.ERROR: "FAIL"}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "doctor", help="check the daemon, the ingest, every agent's integration and the data; explain fixes",
        description="Checks: configuration, daemon running and its version, ingest reachable, each detected "
                    "agent's integration in place and loaded (Claude Code plugin settings and managed policy, "
                    "Codex hook trust), hook events arriving while transcripts grow, disk space, exporter "
                    "backlog, clock and time zone. Exit status 1 when a check failed.")
    add_home(parser)
    add_json(parser)
    parser.add_argument("--all", action="store_true", help="also list the checks that passed")
    parser.set_defaults(func=cmd_doctor)


def run_checks(paths: Paths) -> list[Finding]:
    from collector.cli.status_cmd import _daemon_pid
    from collector.definitions import load_definitions

    config_finding, config = check_config(paths)
    findings = [config_finding]
    pid = _daemon_pid(paths)
    status = read_json(paths.state_dir / "status.json")
    findings.append(check_daemon(paths, pid, status))
    ingest = check_ingest(paths, config, pid)
    if ingest is not None:
        findings.append(ingest)
    loaded = load_definitions(paths.agents_override_dir)
    findings += [Finding("agent definitions", Level.ERROR, str(p), "fix or remove that file") for p in loaded.problems]
    findings += check_agents(loaded.agents, paths, pid is not None)
    findings += [check_disk(paths), check_backlog(status), check_clock(_newest_event(paths, config))]
    findings.append(check_budget(status))
    return findings


def _newest_event(paths: Paths, config: Any) -> int | None:
    from collector.exporters.usage import store_settings
    from collector.usage.store import connect, store_file

    path = store_file(paths.data_dir, store_settings(config)) if config is not None else paths.data_dir / "usage.sqlite"
    if not path.is_file():
        return None
    try:
        db = connect(path, readonly=True)
        try:
            row = db.execute("SELECT MAX(time_ns) FROM events").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return int(row[0]) if row and row[0] is not None else None


def cmd_doctor(args: argparse.Namespace) -> int:
    paths = paths_from(args)
    findings = run_checks(paths)
    failed = any(f.level is Level.ERROR for f in findings)
    if args.json:
        print_json({"ok": not failed, "summary": summary(findings), "findings": [f.as_dict() for f in findings]})
        return 1 if failed else 0
    shown = findings if args.all else [f for f in findings if f.level is not Level.OK]
    for finding in shown:
        sys.stdout.write(f"{MARK[finding.level]:4}  {finding.check}: {finding.message}\n")
        if finding.fix:
            sys.stdout.write(f"      fix: {finding.fix}\n")
    counts = summary(findings)
    verdict = "problems found" if failed else ("all good" if not counts["warn"] else "working, with warnings")
    sys.stdout.write(f"doctor: {verdict} ({counts['ok']} ok, {counts['warn']} warnings, {counts['error']} failed)\n")
    return 1 if failed else 0
