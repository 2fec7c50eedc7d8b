"""Install the Agentty panel plugin (``integrations/agentty/agent-collector/``, named after the plugin's id
as Agentty requires) into Agentty's plugin folder.

Agentty keeps installed plugins in ``~/.agentty/plugins/<id>/`` (what its "Install from Folder…" does).
We copy our folder there only when Agentty is present, add ``agent-collector.json`` (the daemon's URL,
and the ``managedBy`` marker our uninstall requires), and never touch a folder without that marker.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from collector.deploy.model import Action, Change, DeployError
from collector.paths import Paths, project_root

AGENTTY = "agentty"  # what `install --agent` calls the panel
PLUGIN_ID = "agent-collector"
MARKER_FILE = "agent-collector.json"
MANAGED_BY = "agent-collector"
FILES = ("agentty-plugin.json", "agentty_panel.py", "README.md")


def agentty_dir(paths: Paths) -> Path:
    return paths.expand("${AGENTTY_HOME:-~/.agentty}")


def agentty_present(paths: Paths) -> bool:
    return agentty_dir(paths).is_dir()


def plugin_dir(paths: Paths) -> Path:
    return agentty_dir(paths) / "plugins" / PLUGIN_ID


def is_ours(directory: Path) -> bool:
    try:
        marker = json.loads((directory / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("managedBy") == MANAGED_BY


def install_agentty(paths: Paths, port: int, source: Path | None = None, dry_run: bool = False) -> Change:
    target = plugin_dir(paths)
    if not agentty_present(paths):
        why = f"Agentty not found ({agentty_dir(paths)})"
        return Change("agentty", str(target), Action.UNCHANGED, why, dry_run)
    if target.exists() and not is_ours(target):
        return Change("agentty", str(target), Action.CONFLICT,
                      "a plugin folder without the agent-collector marker is there; left untouched", dry_run)
    source = source or project_root() / "integrations" / "agentty" / PLUGIN_ID
    missing = [name for name in FILES if not (source / name).is_file()]
    if missing:
        raise DeployError(f"{source} lacks {', '.join(missing)}")
    marker = json.dumps({"managedBy": MANAGED_BY, "url": f"http://127.0.0.1:{port}",
                         "port_file": str(paths.ingest_port_file), "token_file": str(paths.ingest_token_file)},
                        indent=2) + "\n"
    existed = target.exists()
    unchanged = existed and all((target / n).read_bytes() == (source / n).read_bytes() for n in FILES) and (
        (target / MARKER_FILE).read_text(encoding="utf-8") == marker)
    if unchanged:
        return Change("agentty", str(target), Action.UNCHANGED, "already in place", dry_run)
    if not dry_run:
        target.mkdir(parents=True, exist_ok=True)
        for name in FILES:
            shutil.copyfile(source / name, target / name)
        (target / MARKER_FILE).write_text(marker, encoding="utf-8")
    summary = "panel plugin copied; restart Agentty or enable it under Plugins"
    return Change("agentty", str(target), Action.UPDATE if existed else Action.CREATE, summary, dry_run)


def uninstall_agentty(paths: Paths, dry_run: bool = False) -> Change:
    target = plugin_dir(paths)
    if not target.exists():
        return Change("agentty", str(target), Action.UNCHANGED, "not installed", dry_run)
    if not is_ours(target):
        why = "not written by agent-collector; left untouched"
        return Change("agentty", str(target), Action.CONFLICT, why, dry_run)
    if not dry_run:
        for name in (*FILES, MARKER_FILE):
            (target / name).unlink(missing_ok=True)
        try:
            target.rmdir()  # only when empty: files Agentty or the user added stay
        except OSError:
            kept = "our files removed; other files kept"
            return Change("agentty", str(target), Action.DELETE, kept, dry_run)
    return Change("agentty", str(target), Action.DELETE, "panel plugin removed", dry_run)
