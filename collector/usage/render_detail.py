"""The detail reports (``tools``, ``session ID``, ``models --compare``, ``findings``) as terminal text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from collector.usage.render import _layout


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    return f"{value:,}" if isinstance(value, int) else str(value)


def _usd(value: float | None) -> str:
    return "unpriced" if value is None else f"${value:,.4f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _table(report: dict[str, Any], columns: list[tuple[str, Callable[[dict[str, Any]], str]]],
           total: dict[str, Any] | None) -> list[str]:
    headers = [h for h, _ in columns]
    body = [[cell(row) for _, cell in columns] for row in report["rows"]]
    if total is None:
        return _layout(headers, body, ["Total", *([""] * (len(columns) - 1))])[:-2]
    return _layout(headers, body, [cell(total) for _, cell in columns])


def _tools(report: dict[str, Any]) -> list[str]:
    total = {**report["total"], "tool": "Total", "mean_duration_ms": None,
             "context_share": 1.0 if report["total"]["context_tokens_est"] else None}
    lines = _table(report, [
        ("Tool", lambda r: str(r["tool"])), ("Calls", lambda r: _num(r["calls"])),
        ("Failed", lambda r: _num(r["failures"])), ("Time ms", lambda r: _num(r["duration_ms"])),
        ("Mean ms", lambda r: _num(r["mean_duration_ms"])), ("Result tok~", lambda r: _num(r["result_tokens_est"])),
        ("Context tok~", lambda r: _num(r["context_tokens_est"])), ("Share", lambda r: _pct(r["context_share"]))],
        total)
    return lines + ["", f"~ estimated: a result's bytes / {report['bytes_per_token']}; its context cost is that times "
                        "the model calls of the same context after it (docs/reports.md)."]


def _session(report: dict[str, Any]) -> list[str]:
    rows: list[dict[str, Any]] = []
    for turn in report["rows"]:
        rows.append({**turn, "label": f"turn {turn['turn']}"})
        rows.extend({**sub, "label": f"  subagent {sub['id']}"} for sub in turn["subagents"])
    total = {**report["total"], "label": "Total"}
    lines = _table({"rows": rows}, [
        ("Turn", lambda r: str(r["label"])), ("Calls", lambda r: _num(r["calls"])),
        ("Input", lambda r: _num(r["input_tokens"])), ("Cache read", lambda r: _num(r["cache_read_tokens"])),
        ("Output", lambda r: _num(r["output_tokens"])), ("Tools", lambda r: _num(r["tool_calls"])),
        ("Failed", lambda r: _num(r["tool_failures"])), ("Cost", lambda r: _usd(r["cost_usd"]))], total)
    return [f"{report['agent']} {report['session']}", ""] + lines + [
        "", "A subagent's calls count in the turn that started it and are listed under it."]


def _models(report: dict[str, Any]) -> list[str]:
    return _table(report, [
        ("Model", lambda r: str(r["model"])), ("Calls", lambda r: _num(r["calls"])),
        ("Tokens", lambda r: _num(r["total_tokens"])), ("Cache hit", lambda r: _pct(r["cache_hit_rate"])),
        ("Cost", lambda r: _usd(r["cost_usd"])), ("Tool fail", lambda r: _pct(r["tool_failure_rate"])),
        ("Tasks", lambda r: _num(r["tasks"])), ("Turns/task", lambda r: _num(r["turns_per_task"]))], None)


def _findings(report: dict[str, Any]) -> list[str]:
    if not report["rows"]:
        return ["No findings for this selection."]
    lines = []
    for finding in report["rows"]:
        evidence = ", ".join(f"{k}={v}" for k, v in finding["evidence"].items()
                             if v is not None and k != "times_unix_nano")
        lines += [f"{finding['kind']}: {finding['tool']}", f"  evidence: {evidence}",
                  f"  suggestion: {finding['suggestion']}", ""]
    return lines[:-1]


def detail_lines(report: dict[str, Any]) -> list[str]:
    return {"tools": _tools, "session": _session, "models": _models, "findings": _findings}[report["report"]](report)
