"""``agent-collector install | uninstall`` and ``agents disable | enable``: wire us into agents, or out."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from collector.cli.common import add_home, add_json, checked_config, paths_from, print_json
from collector.daemon.plugins import load_agents
from collector.definitions import AgentDefinition, detect
from collector.deploy import (
    Change,
    IntegrationStatus,
    State,
    consent,
    install_agent,
    integration_state,
    uninstall_agent,
)
from collector.deploy.agentty import AGENTTY, agentty_present, install_agentty, uninstall_agentty
from collector.deploy.choices import disabled_agents, set_disabled
from collector.deploy.model import Action
from collector.deploy.records import RecordStore
from collector.ingest.secret import ensure_token, ingest_port
from collector.paths import Paths

_NOTABLE = {State.UNTRUSTED, State.CONFLICT, State.ERROR, State.NOT_IMPLEMENTED}


def register(subparsers: argparse._SubParsersAction) -> None:
    install = subparsers.add_parser(
        "install", help="add our hooks/plugins to the agents (all detected ones by default)",
        description="Adds agent-collector's hooks or plugin to each agent's own config. Every other setting "
                    "and hook stays; our entries are marked so uninstall removes only them. Agents disabled "
                    "with `agents disable` are skipped.")
    _common(install)
    install.add_argument("--statusline", action="store_true",
                         help="also set the agent's status line to `agent-collector statusline` (Claude Code's "
                              "statusLine; one you had is kept and shown first; `uninstall` restores it)")
    install.add_argument("--telemetry", action=argparse.BooleanOptionalAction, default=None,
                         help="also switch the agent's own OpenTelemetry on, pointed at our receiver (Claude Code's "
                              "env in settings.json, Codex's [otel], Qwen Code's telemetry settings); an endpoint "
                              "you had is kept and still receives it (docs/deploy.md). Remembered per agent: "
                              "later installs and the watchdog keep it; --no-telemetry takes it out")
    install.set_defaults(func=cmd_install)
    uninstall = subparsers.add_parser(
        "uninstall", help="remove our hooks/plugins from the agents (all of them by default)",
        description="Removes only what agent-collector added. A file nobody else touched since comes back "
                    "byte for byte; files and folders we created are deleted.")
    _common(uninstall)
    uninstall.set_defaults(func=cmd_uninstall)


def register_agent_subcommands(sub: argparse._SubParsersAction) -> None:
    """Called by ``agents_cmd``: adds ``agents disable ID`` and ``agents enable ID``."""
    disable = sub.add_parser("disable", help="remove our integration from an agent and keep it out",
                             description="Records your choice, removes our hooks/plugin from the agent; "
                                         "install and the watchdog leave it alone until `agents enable`.")
    disable.add_argument("agent", metavar="ID")
    add_home(disable)
    add_json(disable)
    disable.set_defaults(func=cmd_disable)
    enable = sub.add_parser("enable", help="undo `agents disable` and install the integration again")
    enable.add_argument("agent", metavar="ID")
    add_home(enable)
    add_json(enable)
    enable.set_defaults(func=cmd_enable)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agent", action="append", metavar="ID", help="only this agent (repeatable)")
    parser.add_argument("--dry-run", action="store_true", help="print what would change, change nothing")
    add_home(parser)
    add_json(parser)


def _definitions(paths: Paths) -> dict[str, AgentDefinition]:
    result = load_agents(paths.agents_override_dir)
    for problem in result.problems:
        sys.stderr.write(f"warning: agent definition skipped: {problem}\n")
    return result.agents


def _unknown(requested: Iterable[str], known: Iterable[str]) -> list[str]:
    return sorted(set(requested) - set(known))


def _ingest_port(paths: Paths) -> int:
    from collector.deploy.http_plugin import configured_port

    return configured_port(paths)


def _panel_changes(args: argparse.Namespace, paths: Paths, install: bool) -> list[Change]:
    """The Agentty panel is not an agent we collect from, but `--agent agentty` (or, without --agent, an
    Agentty found on this machine) deploys or removes it like one."""
    wanted = AGENTTY in (args.agent or []) or (not args.agent and agentty_present(paths))
    if not wanted:
        return []
    if install:
        return [install_agentty(paths, _ingest_port(paths), dry_run=args.dry_run)]
    return [uninstall_agentty(paths, dry_run=args.dry_run)]


def cmd_install(args: argparse.Namespace) -> int:
    paths = paths_from(args)
    config = checked_config(paths)
    if not args.dry_run:
        ensure_token(paths)  # the ingest secret the integrations carry (0600, made once)
        ingest_port(paths, config.ingest.port, record=True)  # chosen for this user now, then kept
        consent.give(paths, "agent-collector install")  # the daemon may now deploy agents that appear later
    agents = _definitions(paths)
    panel = _panel_changes(args, paths, install=True)
    requested = [a for a in args.agent or [] if a != AGENTTY]
    unknown = _unknown(requested, agents)
    if unknown:
        sys.stderr.write(f"agent-collector: error: unknown agent(s): {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(agents))}, {AGENTTY})\n")
        return 2
    disabled = disabled_agents(paths)
    skipped_explicit = sorted(set(requested) & disabled)
    if args.agent:
        chosen = [agents[a] for a in requested if a not in disabled]
    else:
        chosen = [d for d in agents.values()
                  if d.enabled and d.id not in disabled and detect(d, paths).installed]
        if not chosen and not args.json:
            print("no installed agents detected (use --agent ID to install anyway)")
    for agent in skipped_explicit:
        sys.stderr.write(f"{agent}: skipped: disabled by you; "
                         f"run `agent-collector agents enable {agent}` first\n")
    if args.telemetry is not None and not args.dry_run:
        _telemetry_choice(paths, chosen, args.telemetry, args.json)
    elif args.telemetry is not None and not args.json:
        verb = "switch on" if args.telemetry else "take out"
        print(f"would {verb} the agents' own telemetry for {', '.join(d.id for d in chosen) or 'no agent'} "
              "(a dry run records no choice, so the lines below do not show it)")
    changes: list[Change] = list(panel)
    notes: list[IntegrationStatus] = []
    for defn in chosen:
        changes += install_agent(defn, paths, dry_run=args.dry_run)
        if not args.dry_run:
            notes += [s for s in integration_state(defn, paths) if s.state in _NOTABLE]
    _report(changes, args.json, notes)
    if args.statusline:
        _statuslines(paths, [d.id for d in chosen if "statusline" in d.raw], True, args)
    return 1 if any(c.failed for c in changes) or skipped_explicit else 0


def _telemetry_choice(paths: Paths, chosen: list[AgentDefinition], on: bool, quiet: bool) -> None:
    """``install --telemetry`` / ``--no-telemetry``: the opt-in, recorded before the integrations are
    deployed (collector.deploy.telemetry_choice)."""
    from collector.deploy import telemetry_choice

    for defn in chosen:
        if not on:
            telemetry_choice.opt_out(paths, defn.id)
            continue
        try:
            record = telemetry_choice.opt_in(paths, defn)
        except ValueError as exc:
            sys.stderr.write(f"note: {exc}\n")
            continue
        forward = record.get("forward")
        if forward and not quiet:
            print(f"{defn.id}: your telemetry endpoint {forward['endpoint']} is kept: agent-collector forwards "
                  "the agent's telemetry to it unchanged")


def _statuslines(paths: Paths, agents: list[str], install: bool, args: argparse.Namespace) -> None:
    """``install --statusline`` and ``uninstall``: the status-line setting (docs/budgets.md)."""
    from collector.deploy.statusline_setting import change

    for agent in agents:
        try:
            lines = change(paths, agent, install, args.dry_run)
        except ValueError as exc:
            lines = [f"{agent}: status line not changed: {exc}"]
        if not args.json:
            print("\n".join(f"{agent}: {text}" for text in lines))


def cmd_uninstall(args: argparse.Namespace) -> int:
    paths = paths_from(args)
    agents = _definitions(paths)
    recorded = {r.agent for r in RecordStore(paths).all()}
    panel = _panel_changes(args, paths, install=False)
    requested = [a for a in args.agent or [] if a != AGENTTY]
    unknown = _unknown(requested, set(agents) | recorded)
    if unknown:
        sys.stderr.write(f"agent-collector: error: unknown agent(s): {', '.join(unknown)}\n")
        return 2
    targets = requested if args.agent else sorted(set(agents) | recorded)
    changes: list[Change] = list(panel)
    for agent in targets:
        changes += uninstall_agent(agents.get(agent, agent), paths, dry_run=args.dry_run)
    from collector.deploy.statusline_setting import installed

    _statuslines(paths, sorted(installed(paths) & set(targets) & set(agents)), False, args)
    if not args.dry_run:
        from collector.deploy.telemetry_choice import opt_out

        for agent in targets:
            opt_out(paths, agent)  # after the files: their edits put the user's own values back
    if not args.agent and not args.dry_run:
        consent.withdraw(paths)  # everything taken out: the daemon deploys nothing by itself any more
    _report(changes, args.json, [])
    return 1 if any(c.failed for c in changes) else 0


def cmd_disable(args: argparse.Namespace) -> int:
    paths = paths_from(args)
    agents = _definitions(paths)
    recorded = {r.agent for r in RecordStore(paths).all()}
    if args.agent not in agents and args.agent not in recorded:
        sys.stderr.write(f"agent-collector: error: unknown agent: {args.agent}\n")
        return 2
    changed = set_disabled(paths, args.agent, True)
    if not args.json:
        already = "" if changed else " (already)"
        print(f"{args.agent}: disabled{already}; install and the watchdog will leave it alone")
    changes = uninstall_agent(agents.get(args.agent, args.agent), paths)
    _report(changes, args.json, [], {"agent": args.agent, "enabled": False, "changed": changed})
    return 1 if any(c.failed for c in changes) else 0


def cmd_enable(args: argparse.Namespace) -> int:
    paths = paths_from(args)
    agents = _definitions(paths)
    if args.agent not in agents:
        sys.stderr.write(f"agent-collector: error: unknown agent: {args.agent}\n")
        return 2
    changed = set_disabled(paths, args.agent, False)
    if not args.json:
        print(f"{args.agent}: enabled{'' if changed else ' (it was not disabled)'}")
    defn = agents[args.agent]
    changes = install_agent(defn, paths)
    _report(changes, args.json, [s for s in integration_state(defn, paths) if s.state in _NOTABLE],
            {"agent": args.agent, "enabled": True, "changed": changed})
    return 1 if any(c.failed for c in changes) else 0


def _report(changes: list[Change], as_json: bool, notes: list[IntegrationStatus],
            head: dict[str, Any] | None = None) -> None:
    if as_json:
        print_json({
            **(head or {}),
            "changes": [{"agent": c.agent, "file": c.file, "action": c.action.value, "summary": c.summary,
                         "dry_run": c.dry_run} for c in changes],
            "notes": [n.as_dict() for n in notes],
        })
        return
    for change in changes:
        conflict = change.action is Action.CONFLICT
        stream = sys.stderr if change.failed or conflict else sys.stdout
        stream.write(("error: " if change.failed else "warning: " if conflict else "") + str(change) + "\n")
    for note in notes:
        print(f"note: {note.agent} {note.kind}: {note.state.value.replace('_', ' ')}: {note.hint}")


def hook_script_path() -> Path:
    """The hook script commands point at (for diagnostics)."""
    from collector.deploy.hookcmd import default_hook_script

    return default_hook_script()
