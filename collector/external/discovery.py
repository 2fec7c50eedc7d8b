"""Finding plugins as the protocol says: ``entire-agent-<name>`` executables on the absolute entries of
PATH (a relative entry is skipped: it would resolve against whatever the working directory is), the first
of a name wins, a name that is an agent of ``agents.d`` is skipped, and ``info`` must answer with
``protocol_version`` 1. Every skip has a reason, logged and shown by ``status`` / ``agents list``. The
``info`` handshakes run in parallel, each under ``INFO_TIMEOUT_S``: plugins that hang delay the start by
one timeout at most, not one each."""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from collector.external.plugin import PROTOCOL_VERSION, Caller, ExternalPlugin, PluginError
from collector.sources.process import Limits

log = logging.getLogger(__name__)

PREFIX = "entire-agent-"
INFO_TIMEOUT_S = 10.0
MAX_PARALLEL = 16  # handshakes at once
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
    asked: list[ExternalPlugin] = []
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
                asked.append(ExternalPlugin(name, str(path)))
    if asked:
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(asked)), thread_name_prefix="plugin-info") as pool:
            answers = list(pool.map(lambda plugin: _handshake(plugin, caller, repo), asked))
        for plugin, (accepted, reason) in zip(asked, answers, strict=True):
            if accepted is not None:
                found.plugins.append(accepted)
            else:
                found.skip(f"{plugin.path}: {reason}")
    return found


def _handshake(plugin: ExternalPlugin, caller: Caller, repo: str) -> tuple[ExternalPlugin | None, str]:
    """The plugin with its ``info``, or None and why it is skipped."""
    try:
        info = caller.obj(plugin, "info", [], repo)
    except PluginError as exc:
        return None, f"info failed: {exc}"
    version = info.get("protocol_version")
    if version != PROTOCOL_VERSION:
        return None, f"protocol_version {version!r}, this collector speaks {PROTOCOL_VERSION}"
    return ExternalPlugin(plugin.name, plugin.path, info), ""
