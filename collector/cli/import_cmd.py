"""``agent-collector import loongsuite``: switch from LoongSuite Pilot in one command.

Reads Pilot's home (``collector.cli.pilot_import``), writes each converted definition into our agents.d
overrides, carries its settings into ``config.toml`` (the file's earlier bytes kept beside it as
``config.toml.before-pilot-import``) and its live span attributes into ``attributes.json``, and with
``--remove-pilot-hooks`` takes Pilot's hooks out of the agents we hook ourselves
(``collector.deploy.pilot_hooks``; ``--restore-pilot-hooks`` puts them back byte for byte).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import orjson

from collector.cli.common import CommandError, add_home, paths_from, print_json
from collector.cli.pilot_import import Plan, plan_import, read_json
from collector.paths import Paths

BACKUP_SUFFIX = ".before-pilot-import"
CONVERTED_MARK = "Converted from LoongSuite Pilot"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("import", help="bring another collector's setup over (LoongSuite Pilot)")
    sub = parser.add_subparsers(dest="import_command", required=True, metavar="SOURCE")
    pilot = sub.add_parser(
        "loongsuite", help="convert LoongSuite Pilot's agent definitions and settings into ours",
        description="Reads a LoongSuite Pilot home (config.json, agents.d.local/, span-attributes.json) and "
                    "writes: one agents.d override per definition it converts (it reads the records Pilot's own "
                    "hook or plugin writes; an agent we ship a definition for uses ours), config.toml keys for "
                    "Pilot's user id, per-agent content capture, OTLP trace backend and global span attributes, "
                    "and attributes.json for its live attributes. One line per definition converted or not, "
                    "and why.")
    add_home(pilot)
    pilot.add_argument("--pilot-home", metavar="DIR", help="Pilot's data folder (default: HOME/.loongsuite-pilot)")
    pilot.add_argument("--dry-run", action="store_true", help="change nothing; say what would be done")
    hooks = pilot.add_mutually_exclusive_group()
    hooks.add_argument("--remove-pilot-hooks", action="store_true",
                       help="also take Pilot's hooks out of the config files of the agents agent-collector hooks "
                            "itself (stop Pilot first: its watchdog puts them back), keeping their exact bytes")
    hooks.add_argument("--restore-pilot-hooks", action="store_true",
                       help="put back, byte for byte, the files --remove-pilot-hooks changed (nothing else)")
    pilot.add_argument("--json", action="store_true", help="print what was done as JSON")
    pilot.set_defaults(func=cmd_loongsuite)


def cmd_loongsuite(args: argparse.Namespace) -> int:
    from collector.daemon.plugins import load_agents
    from collector.deploy import pilot_hooks

    paths = paths_from(args)
    if args.restore_pilot_hooks:
        return _report({"hooks": pilot_hooks.restore(paths, args.dry_run)}, args.json)
    pilot_home = Path(args.pilot_home).expanduser() if args.pilot_home else paths.home / ".loongsuite-pilot"
    if not pilot_home.is_dir():
        raise CommandError(f"{pilot_home}: no LoongSuite Pilot home there (give --pilot-home DIR)")
    builtin = load_agents(None).agents
    plan = plan_import(pilot_home, paths, builtin)
    out: dict[str, Any] = {"definitions": _definitions(plan, paths, args.dry_run)}
    # the agents config.toml may name: ours, the user's own in agents.d, and those converted now
    known = set(load_agents(paths.agents_override_dir).agents) | {c.pilot_id for _, c in plan.conversions
                                                                  if c.definition}
    out["config"] = plan.lines + _config(plan, paths, known, args.dry_run) + _live(plan, paths, args.dry_run)
    if args.remove_pilot_hooks:
        found = pilot_hooks.targets(builtin.values(), paths, plan.pilot_files)
        out["hooks"] = _running(pilot_home) + (pilot_hooks.remove(paths, found, args.dry_run) or [
            "no LoongSuite Pilot hooks found in the agents agent-collector hooks"])
        if any(" removed " in line for line in out["hooks"]):
            out["hooks"].append("run `agent-collector install` so that ours collect from these agents "
                                "(`import loongsuite --restore-pilot-hooks` puts Pilot's back)")
    return _report(out, args.json)


def _running(pilot_home: Path) -> list[str]:
    """A warning when Pilot's daemon runs (its pid file, ``$PILOT_DATA/loongsuite-pilot.pid``): its hook
    watchdog puts removed hooks back within minutes."""
    from collector.util.regular import read_regular

    data = read_regular(str(pilot_home / "loongsuite-pilot.pid"), 32) or b""
    try:
        pid = int(data.strip() or b"0")
        if pid <= 1:
            return []
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError, OverflowError):
        return []
    except PermissionError:
        pass  # another user's process holds the number: it runs
    return [f"warning: LoongSuite Pilot's daemon runs (pid {pid}); its hook watchdog puts the hooks back: "
            "stop it first (loongsuite-pilot stop)"]


def _report(out: dict[str, Any], as_json: bool) -> int:
    if as_json:
        print_json(out)
        return 0
    for item in out.get("definitions", []):
        print(item["line"])
        for why in item["reasons"] + item["notes"]:
            print(f"  {why}")
    for line in out.get("config", []) + out.get("hooks", []):
        print(line)
    return 0


def _definitions(plan: Plan, paths: Paths, dry_run: bool) -> list[dict[str, Any]]:
    items = []
    for source, conv in plan.conversions:
        item: dict[str, Any] = {"file": str(source), "id": conv.pilot_id, "reasons": list(conv.reasons),
                                "notes": list(conv.notes), "written": None}
        if conv.ours:
            item.update(result="ours", line=f"{conv.pilot_id}: converted: our definition {conv.ours!r} is used")
        elif conv.definition is None:
            item.update(result="not converted", line=f"{conv.pilot_id}: not converted")
        else:
            target = paths.agents_override_dir / f"{conv.pilot_id}.json"
            item.update(result="converted", line=_write_definition(target, conv.definition, dry_run))
            item["written"] = None if dry_run or "left as it is" in item["line"] else str(target)
        items.append(item)
    return items


def _write_definition(target: Path, definition: dict[str, Any], dry_run: bool) -> str:
    ident = definition["id"]
    existing, _ = read_json(target)
    if isinstance(existing, dict) and not str(existing.get("notes", "")).startswith(CONVERTED_MARK):
        return f"{ident}: converted, but {target} is the user's own; left as it is"
    if dry_run:
        return f"{ident}: converted: would write {target} (reads {definition['sources'][0]['globs'][0]})"
    from collector.util.atomic import atomic_write

    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, orjson.dumps(definition, option=orjson.OPT_INDENT_2) + b"\n", mode=0o600)
    return f"{ident}: converted: wrote {target} (reads {definition['sources'][0]['globs'][0]})"


def _merged(existing: dict[str, Any], imported: dict[str, Any]) -> dict[str, Any]:
    """Our config with the imported keys set (they win); Pilot's backend replaces one of the same name."""
    out = dict(existing)
    for key, value in imported.items():
        if key == "otlp" and isinstance(out.get("otlp"), dict):
            mine = dict(out["otlp"])
            names = {b["name"] for b in value["backends"]}
            kept = [b for b in mine.get("backends", []) if not (isinstance(b, dict) and b.get("name") in names)]
            mine.update({k: v for k, v in value.items() if k != "backends"}, backends=kept + value["backends"])
            out["otlp"] = mine
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def _config(plan: Plan, paths: Paths, known: set[str], dry_run: bool) -> list[str]:
    from collector.config import ConfigError, load_config
    from collector.exporters.otlp_config import OtlpConfigError, load_otlp_config
    from collector.util.atomic import atomic_write
    from collector.util.toml_write import dumps

    if not plan.config:
        return []
    file = paths.config_file
    before = file.read_bytes() if file.is_file() else None
    try:
        existing = tomllib.loads(before.decode("utf-8")) if before else {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return [f"config: {file} is not valid TOML ({exc}); not changed"]
    text = dumps(_merged(existing, plan.config))
    with tempfile.TemporaryDirectory() as tmp:  # checked as `run` will check it, before it replaces anything
        candidate = Path(tmp) / "config.toml"
        candidate.write_text(text)
        try:
            load_otlp_config(load_config(candidate, env={}, known_agents=known).otlp, {})
        except (ConfigError, OtlpConfigError) as exc:
            return [f"config: the imported settings do not check ({str(exc).replace(str(candidate), 'config.toml')});"
                    f" {file} not changed"]
    if dry_run:
        return [f"config: would write {file}"]
    backup = file.with_name(file.name + BACKUP_SUFFIX)
    lines = []
    if before is not None and not backup.exists():
        atomic_write(backup, before, mode=0o600)
        lines.append(f"config: kept the earlier {file.name} as {backup} (comments are not carried over)")
    atomic_write(file, text.encode("utf-8"), mode=0o600)
    return lines + [f"config: wrote {file}"]


def _live(plan: Plan, paths: Paths, dry_run: bool) -> list[str]:
    from collector.pipeline.attributes import attribute_file
    from collector.util.atomic import atomic_write

    if not plan.live_attributes:
        return []
    target = attribute_file(paths.config_dir)
    current, problem = read_json(target)
    if problem or (current is not None and not isinstance(current, dict)):
        return [f"attributes: {problem or f'{target} is not a JSON object'}; not changed"]
    merged = {**plan.live_attributes, **(current or {})}  # an attribute already set here stays
    if dry_run:
        return [f"attributes: would write {target}"]
    os.makedirs(target.parent, exist_ok=True)
    atomic_write(target, orjson.dumps(merged, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS), mode=0o600)
    return [f"attributes: wrote {target}"]
