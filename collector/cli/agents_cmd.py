"""``agent-collector agents list|detect``: what agents we know and which are installed here."""

from __future__ import annotations

import argparse
import sys

from collector.cli.common import add_home, add_json, paths_from, print_json, print_table
from collector.cli.health import print_external, print_polled
from collector.daemon.plugins import load_agents
from collector.definitions import AgentDefinition, LoadResult, detect
from collector.deploy import integration_state
from collector.paths import Paths


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("agents", help="list known agents and detect installed ones",
                                   description="Agent definitions come from agents.d/*.json in the package and "
                                   "from <config dir>/agents.d/*.json (same id deep-merges, new id adds).")
    sub = parser.add_subparsers(dest="agents_command", required=True, metavar="COMMAND")
    lst = sub.add_parser("list", help="every agent definition, with its integration and sources")
    add_home(lst)
    add_json(lst)
    lst.set_defaults(func=cmd_list)
    det = sub.add_parser("detect", help="which agents are installed on this machine (paths, commands)")
    add_home(det)
    add_json(det)
    det.set_defaults(func=cmd_detect)
    _register_extra(sub)


def _register_extra(sub: argparse._SubParsersAction) -> None:
    import collector.cli.deploy_cmd as deploy_cmd  # enable / disable live with install / uninstall

    deploy_cmd.register_agent_subcommands(sub)


def _problems(result: LoadResult) -> None:
    for problem in result.problems:
        sys.stderr.write(f"warning: agent definition skipped: {problem}\n")
    for notice in result.notices:
        sys.stderr.write(f"note: {notice}\n")


def cmd_list(args: argparse.Namespace) -> int:
    paths = paths_from(args)
    result = load_agents(paths.agents_override_dir)
    _problems(result)
    if args.json:
        print_json({k: {"files": list(d.files), **d.raw} for k, d in result.agents.items()})
        return 0
    rows = [
        (d.id, d.name, ", ".join(i["kind"] for i in d.integrations) or "none (polling)",
         ", ".join(s["kind"] for s in d.sources), "yes" if d.enabled else "no")
        for d in result.agents.values()
    ]
    print_table(("ID", "NAME", "INTEGRATION", "SOURCES", "ENABLED"), rows)
    _health(paths)
    return 1 if result.problems else 0


def _health(paths: Paths) -> None:
    """Polled programs and external plugins as the daemon (or the last collect) last saw them."""
    from collector.cli.status_cmd import read_status

    status = read_status(paths)
    print_polled(status.get("sources") or {})
    print_external(status.get("external_agents"))


def cmd_detect(args: argparse.Namespace) -> int:
    paths = paths_from(args)
    result = load_agents(paths.agents_override_dir)
    _problems(result)
    detections = [detect(d, paths) for d in result.agents.values()]
    notes = _integration_notes(result.agents, paths)
    if args.json:
        print_json({
            d.agent: {"installed": d.installed, "paths": list(d.found_paths), "commands": list(d.found_commands),
                      "integration": notes.get(d.agent, [])}
            for d in detections
        })
        return 0
    rows = [
        (d.agent, "yes" if d.installed else "no", ", ".join(d.found_paths + d.found_commands) or "-",
         "; ".join(n.get("summary", "") for n in notes.get(d.agent, [])) or "-")
        for d in detections
    ]
    print_table(("AGENT", "INSTALLED", "FOUND", "INTEGRATION"), rows)
    return 0


def _integration_notes(agents: dict[str, AgentDefinition], paths: Paths) -> dict[str, list[dict[str, str]]]:
    """Integration state per agent: in place, missing, modified by someone else, untrusted (Codex)..."""
    out: dict[str, list[dict[str, str]]] = {}
    for agent_id, defn in agents.items():
        try:
            out[agent_id] = [s.as_dict() for s in integration_state(defn, paths)]
        except Exception as exc:  # noqa: BLE001 - one agent's broken config must not hide the others
            out[agent_id] = [{"summary": f"error: {exc}"}]
    return out
