"""The ``hooks_dir`` integration: hooks as separate executables in a folder the agent scans (Cline).

The agent runs every file in ``dir`` whose name is an event name (``file_name``, default ``{event}``,
e.g. ``~/.cline/hooks/PreToolUse``) with the event's JSON on stdin, and reads its stdout as the hook's
answer. For each event we write one small POSIX sh wrapper, ours by the ``agent-collector:managed``
marker (a :class:`~collector.deploy.plugin_files.ManagedFile`, mode 0755):

* it prints the answer the agent expects (the spec's ``stdout``, e.g. ``{"cancel": false}``) first, so a
  blocking hook is answered whatever happens after;
* then it ``exec``\\ s the shared spool hook script (``hooks/agent-collector-hook.sh``) with the agent id,
  the event and the spool folder baked in: no Python or Node starts, the script's own time cap applies
  and it exits 0 (fail open). A wrapper whose hook script is gone exits 0 at once.

A file of that name that is not ours is never replaced (that event is reported as an error and the user's
hook keeps running); uninstall deletes only our files, and the folders we created for them.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collector.deploy.file_edit import FileEdit
from collector.deploy.hookcmd import ASSET_MARKER, hook_argv
from collector.deploy.model import DeployError
from collector.deploy.plugin_files import ManagedFile
from collector.paths import Paths

EXECUTABLE = 0o755


class HookExecutable(ManagedFile):
    """One event's wrapper: a whole file that is ours, written executable."""

    mode = EXECUTABLE


def wrapper_text(agent: str, event: str, spec: dict[str, Any], paths: Paths, hook_script: Path | None) -> str:
    argv = hook_argv(paths, agent, event, hook_script)
    script = shlex.quote(argv[1])
    lines = [
        "#!/bin/sh",
        f"# {ASSET_MARKER}: the {event} hook of agent-collector for {agent}.",
        "# It answers at once, then appends the event to agent-collector's spool and exits 0.",
        "# `agent-collector uninstall` removes this file.",
    ]
    answer = spec.get("stdout")
    if answer:
        lines.append(f"printf '%s\\n' {shlex.quote(str(answer))}")
    lines += [
        f"[ -r {script} ] || exit 0",
        "exec " + " ".join(shlex.quote(part) for part in argv),
        "",
    ]
    return "\n".join(lines)


def hooks_dir_edits(agent: str, spec: dict[str, Any], paths: Paths, hook_script: Path | None) -> list[FileEdit]:
    folder = paths.expand(spec["dir"])
    template = str(spec.get("file_name", "{event}"))
    if "{event}" not in template or "/" in template:
        raise DeployError(f"hooks_dir file_name {template!r} must hold {{event}} and no '/'")
    edits: list[FileEdit] = []
    for event in spec["events"]:
        content = wrapper_text(agent, event, spec, paths, hook_script).encode("utf-8")
        edits.append(HookExecutable(agent, spec, folder / template.format(event=event), _constant(content)))
    return edits


def _constant(content: bytes) -> Callable[[], bytes]:
    return lambda: content
