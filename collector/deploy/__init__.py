"""Deploy: wire agent-collector into each agent (hooks, notify, plugins), and take it out again.

Public API (the CLI and the watchdog use only these):
- ``install_agent(defn, paths, hook_script=None, dry_run=False) -> list[Change]``
- ``uninstall_agent(defn_or_id, paths, dry_run=False) -> list[Change]``
- ``integration_state(defn, paths) -> list[IntegrationStatus]``
- ``repair_file(defn, paths, file)``, ``deployed_files(paths, agent=None)``
- ``hook_command(paths, agent, event)``; the user's per-agent choice in ``choices``.
"""

from collector.deploy.engine import (
    deployed_files,
    install_agent,
    integration_state,
    repair_file,
    uninstall_agent,
)
from collector.deploy.hookcmd import hook_command
from collector.deploy.model import Action, Change, DeployError, IntegrationStatus, State

__all__ = [
    "Action",
    "Change",
    "DeployError",
    "IntegrationStatus",
    "State",
    "deployed_files",
    "hook_command",
    "install_agent",
    "integration_state",
    "repair_file",
    "uninstall_agent",
]
