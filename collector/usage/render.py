"""Reports as terminal tables: right-aligned numbers, compact ones (12.6k, 1.2M) when the exact ones do
not fit the width, one row per period (and per model with ``--breakdown``), a total line, footnotes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from collector.util.short_ids import shortest_unique

KEY_HEADERS = {"daily": "Date", "weekly": "Week of", "monthly": "Month", "session": "Session",
               "model": "Model", "agent": "Agent", "project": "Project", "repo": "Repository", "branch": "Branch",
               "worktree": "Worktree", "blocks": "Block (5 h)"}
COLUMNS = (("Input", "uncached_input_tokens"), ("Cache read", "cache_read_tokens"),
           ("Cache write", "cache_write_tokens"), ("Output", "output_tokens"), ("Reasoning", "reasoning_tokens"),
           ("Calls", "calls"), ("Tools", "tool_calls"), ("Failed", "tool_failures"))
SHORT = ("In", "C.read", "C.write", "Out", "Reas", "Calls", "Tools", "Fail")
# exact numbers, full headers -> compact numbers -> compact numbers, short headers, one-space gaps
LAYOUTS = ((True, False), (False, False), (False, True))


def compact(n: int) -> str:
    for size, suffix in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if abs(n) >= size:
            return f"{n / size:.1f}{suffix}"
    return str(n)


def money(row: dict[str, Any]) -> str:
    cost = row["cost_usd"]
    if cost is None:
        return "unpriced"
    text = f"${cost:,.4f}" if cost < 1 else f"${cost:,.2f}"
    if row["unpriced_calls"]:
        text += "*"
    if row["cost_differs"]:
        text += "!"
    return text


def _short_ids(report: dict[str, Any]) -> dict[str, str]:
    """Session ids shortened only where the short form is unique in this report."""
    return shortest_unique(str(r["session"]) for r in report["rows"]) if report["report"] == "session" else {}


def _label(report: dict[str, Any], row: dict[str, Any], short: dict[str, str]) -> str:
    kind = report["report"]
    if kind == "session":
        project = (row.get("project") or "").rstrip("/").rsplit("/", 1)[-1]
        return f"{row['agent']} {short[str(row['session'])]}" + (f" {project}" if project else "")
    if kind == "blocks":
        return row["start"].replace("T", " ") + (" (active)" if row.get("active") else "")
    if row["key"]:
        return str(row["key"])
    return "unknown" if kind == "model" else "(none)"  # as the footnotes name it


def _cells(label: str, row: dict[str, Any], exact: bool) -> list[str]:
    fmt = (lambda n: f"{n:,}") if exact else compact
    return [label] + [fmt(row[field]) for _, field in COLUMNS] + [money(row)]


def table_lines(report: dict[str, Any], breakdown: bool, width: int) -> list[str]:
    for exact, short in LAYOUTS:
        lines = _table(report, breakdown, exact, short)
        if max(len(line) for line in lines) <= width:
            break
    return lines + _notes(report)


def _table(report: dict[str, Any], breakdown: bool, exact: bool, short: bool = False) -> list[str]:
    names = SHORT if short else tuple(h for h, _ in COLUMNS)
    headers = [KEY_HEADERS[report["report"]]] + list(names) + ["Cost"]
    body: list[list[str]] = []
    ids = _short_ids(report)
    for row in report["rows"]:
        body.append(_cells(_label(report, row, ids), row, exact))
        if breakdown and report["report"] != "model":
            body.extend(_cells("  " + m["model"], m, exact) for m in row["models"])
    total = _cells("Total", report["total"], exact)
    return _layout(headers, body, total, " " if short else "  ")


def _layout(headers: Sequence[str], body: list[list[str]], total: list[str], gap: str = "  ") -> list[str]:
    rows = [list(headers), *body, total]
    widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return gap.join([first, *rest]).rstrip()

    rule = gap.join("-" * w for w in widths)
    return [line(headers), rule, *(line(r) for r in body), rule, line(total)]


def _notes(report: dict[str, Any]) -> list[str]:
    notes = ["", "Input: uncached; cache reads and writes apart (all three are input tokens).",
             f"Prices: {report['price_table']}; times in {report['timezone']}."]
    by_table = _priced_by(report)
    if by_table:
        notes.append(f"Priced by: {by_table}.")
    unpriced = report["total"]["unpriced_calls"]
    if unpriced:
        models = sorted({m["model"] for r in report["rows"] for m in r["models"] if m["cost_usd"] is None})
        notes.append(f"* {unpriced} calls of models the price table does not know are not in the cost: "
                     f"{', '.join(models)}")
    differ = [r for r in report["rows"] if r["cost_differs"]]
    short = _short_ids(report) if differ else {}
    for row in differ:
        notes.append(f"! {_label(report, row, short)}: the agent itself reported ${row['agent_cost_usd']:,.4f}")
    if not report["rows"]:
        notes.insert(0, "No usage recorded for this selection.")
    return notes


def _priced_by(report: dict[str, Any]) -> str:
    """Which table priced which models, when not all came from genai-prices alone."""
    models: dict[str, set[str]] = {}
    for row in report["rows"]:
        for m in row["models"]:
            for source in (m.get("price_source") or "").split(", "):
                if source:
                    models.setdefault(source, set()).add(m["model"] or "unknown")
    if set(models) <= {"genai-prices"}:
        return ""
    return "; ".join(f"{source}: {', '.join(sorted(names))}" for source, names in sorted(models.items()))

