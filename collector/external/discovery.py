"""Finding plugins as the protocol says: ``entire-agent-<name>`` executables on the absolute entries of
PATH (a relative entry is skipped: it would resolve against whatever the working directory is), the first
of a name wins, a name that is an agent of ``agents.d`` is skipped, and ``info`` must answer with
``protocol_version`` 1. Every skip has a reason, logged and shown by ``status`` / ``agents list``."""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from collector.external.plugin import PROTOCOL_VERSION, Caller, ExternalPlugin, PluginError
from collector.sources.process import Limits

log = logging.getLogger(__name__)

PREFIX = "entire-agent-"
INFO_TIMEOUT_S = 10.0
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")


@dataclass(slots=True)
class Discovery:
    plugins: list[ExternalPlugin] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # one reason per line

    def skip(self, reason: str) -> None:
        self.skipped.append(reason)
        log.warning("external agent skipped: %s", reason)


def _candidates(entry: str, found: Discovery) -> Iterable[Path]:
    if not os.path.isabs(entry):
        found.skip(f"PATH entry {entry!r} is not absolute")
        return []
    try:
        names = sorted(n for n in os.listdir(entry) if n.startswith(PREFIX))
    except OSError:
        return []
    out = []
    for name in names:
        path = Path(entry) / name
        try:
            st = path.stat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and os.access(path, os.X_OK):
            out.append(path)
    return out


def discover(path_env: str, builtin: Iterable[str], repo: str, max_output: int,
             wanted: Iterable[str] = ()) -> Discovery:
    """``wanted``: only these names are asked for ``info`` (empty: every candidate)."""
    found = Discovery()
    only = set(wanted)
    known = set(builtin)
    taken: dict[str, Path] = {}
    caller = Caller(Limits(INFO_TIMEOUT_S, max_output, 64 * 1024))
    for entry in path_env.split(os.pathsep):
        if not entry:
            continue
        for path in _candidates(entry, found):
            name = path.name[len(PREFIX):]
            if name in taken:
                log.info("%s: shadowed by %s (first on PATH wins)", path, taken[name])
                continue
            taken[name] = path
            if not _NAME.match(name):
                found.skip(f"{path}: {name!r} is not a usable agent name")
            elif name in known:
                found.skip(f"{path}: {name!r} is an agent of agents.d")
            elif only and name not in only:
                log.info("%s: not in [external_agents] plugins; not run", path)
            else:
                _handshake(ExternalPlugin(name, str(path)), caller, repo, found)
    return found


def _handshake(plugin: ExternalPlugin, caller: Caller, repo: str, found: Discovery) -> None:
    try:
        info = caller.obj(plugin, "info", [], repo)
    except PluginError as exc:
        found.skip(f"{plugin.path}: info failed: {exc}")
        return
    version = info.get("protocol_version")
    if version != PROTOCOL_VERSION:
        found.skip(f"{plugin.path}: protocol_version {version!r}, this collector speaks {PROTOCOL_VERSION}")
        return
    found.plugins.append(ExternalPlugin(plugin.name, plugin.path, info))
