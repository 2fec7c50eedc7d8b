"""The status line as the agent runs it, every few seconds: ``agent-collector statusline show`` without
the command line's machinery. ``install`` writes ``python -S -c`` with this package's folder on the path
(``collector.deploy.statusline_setting.our_setting``): no ``site`` start-up (the editable install's
finder alone costs more than the line), no argparse, only the standard library's ``json``, ``os``,
``sys`` and ``time`` and :mod:`collector.usage.statusline`. Options it does not know (``--help``,
``install``) go to :func:`collector.cli.statusline_cmd.main`."""

from __future__ import annotations

import json
import os
import sys
import time

from collector.usage.statusline import DEFAULT_FORMAT, line, values

MAX_INPUT = 1 << 20
OPTIONS = ("--state-dir", "--agent", "--format")


def parse(argv: list[str]) -> dict[str, str] | None:
    """``--state-dir D --agent A --format F --json`` (``--opt=value`` too); None: anything else."""
    out: dict[str, str] = {}
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        if arg == "--json":
            out["json"] = "1"
            continue
        name, eq, value = arg.partition("=")
        if name not in OPTIONS or (not eq and not rest):
            return None
        out[name[2:]] = value if eq else rest.pop(0)
    return out if "state-dir" in out else None


def _json_file(path: str) -> object:
    try:
        with open(path, "rb") as f:
            return json.loads(f.read(MAX_INPUT))
    except (OSError, ValueError):
        return None


def _stdin() -> tuple[dict[str, object], bytes]:
    if sys.stdin is None or sys.stdin.isatty():
        return {}, b"{}"
    raw = sys.stdin.buffer.read(MAX_INPUT)
    try:
        data = json.loads(raw)
    except ValueError:
        return {}, raw
    return (data if isinstance(data, dict) else {}), raw


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args is None:
        from collector.cli.statusline_cmd import main as full

        return full(argv)
    payload, raw = _stdin()
    spend = _json_file(os.path.join(args["state-dir"], "spend.json"))
    spend = spend if isinstance(spend, dict) else None
    out = sys.__stdout__ or sys.stdout
    try:
        if "json" in args:
            out.write(json.dumps(values(payload, spend or {}, time.time())) + "\n")
            return 0
        ours = line(payload, spend, args.get("format", DEFAULT_FORMAT))
        before = _chained(args["state-dir"], args.get("agent", "claude-code"), raw)
        out.write(f"{before}  {ours}\n" if before else ours + "\n")
        out.flush()
    except BrokenPipeError:
        pass
    return 0


def _chained(state_dir: str, agent: str, raw: bytes) -> str:
    saved = _json_file(os.path.join(state_dir, "statusline.json"))
    previous = saved.get(agent, {}).get("previous") if isinstance(saved, dict) else None
    if not isinstance(previous, dict) or not isinstance(previous.get("command"), str):
        return ""
    from collector.cli.statusline_cmd import run_previous

    return run_previous(previous["command"], raw)


if __name__ == "__main__":
    sys.exit(main())
