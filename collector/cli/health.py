"""The health of the polled programs (``command`` sources, external agent plugins) for ``status``: one
row per program with its last run, exit code, duration, records, failures and circuit breaker."""

from __future__ import annotations

import time
from typing import Any

from collector.cli.common import print_table

POLLED_KINDS = ("command", "external")


def polled(sources: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(n, s) for n, s in sorted(sources.items()) if s.get("kind") in POLLED_KINDS]


def print_polled(sources: dict[str, dict[str, Any]]) -> None:
    rows = polled(sources)
    if not rows:
        return
    print()
    print_table(("POLLED", "RUNS", "LAST RUN", "EXIT", "TIME MS", "RECORDS", "FAILURES", "BREAKER"),
                [(n, s.get("runs"), _ago(s.get("last_run")), _dash(s.get("last_exit_code")),
                  _dash(s.get("last_duration_ms")), _dash(s.get("last_records")), s.get("failures"),
                  _breaker(s)) for n, s in rows])
    for name, s in rows:
        if s.get("last_error"):
            print(f"{name}: last error: {s['last_error']}")
        for problem in s.get("problems") or []:
            print(f"{name}: {problem}")


def print_external(external: dict[str, Any] | None) -> None:
    """The external agent plugins of the last discovery, and every one it skipped with its reason."""
    if not external or not external.get("enabled"):
        return
    print()
    plugins = external.get("plugins") or {}
    print(f"external agents: {len(plugins)} plugins over {len(external.get('repos') or [])} repositories")
    for name, plugin in sorted(plugins.items()):
        print(f"  {name}: {plugin.get('path')} ({', '.join(plugin.get('capabilities') or []) or 'no capabilities'})")
    for reason in external.get("skipped") or []:
        print(f"  skipped: {reason}")


def _breaker(s: dict[str, Any]) -> str:
    if s.get("breaker") == "open":
        return f"open ({s.get('consecutive_failures')} failures, next in {s.get('next_run_in_s')}s)"
    return str(s.get("breaker") or "-")


def _ago(at: float | None) -> str:
    return "-" if not at else f"{time.time() - at:.0f}s ago"


def _dash(value: Any) -> Any:
    return "-" if value is None else value
