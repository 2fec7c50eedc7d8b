"""LoongSuite Pilot's agent definitions, converted into ours (pure functions, no file access).

Pilot (github.com/alibaba/loongsuite-pilot, ``docs/agent-onboarding.md``) describes an agent with ``id``,
``displayName``, ``deployMode``, ``detection`` {paths, commands}, one block per deploy mode (``hook``,
``pluginInject``, ...) and ``input`` {type, logDir, filePattern}. Its hooks and plugins append canonical
records under ``$PILOT_DATA/logs/<id>/`` (``$PILOT_DATA`` = ``~/.loongsuite-pilot``), which our
``canonical`` parser reads as written. So a converted definition keeps reading what Pilot's own hook or
plugin writes: parser ``canonical``, one ``jsonl`` source over that folder, no integration of ours (Pilot's
stays where it is). An agent we ship a definition for uses ours instead (it hooks the agent itself).

What cannot be converted says why, one line per field: an input Pilot reads with code of its own (a
transcript poller, a SQLite reader: ``BaseSqliteInput`` subclasses hold the query and the row mapping, the
definition names only ``dbPath``), a folder outside ``$PILOT_DATA`` (the agent's own files, in a format only
Pilot's code reads), no input at all. Fields that are converted around (the hook block, the self-check's
``activityIndicator``, ...) are named too, as notes.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import orjson

# Keys only Pilot's definitions have (ours require ``parser``, which Pilot's never have).
PILOT_KEYS = frozenset({"displayName", "deployMode", "detection", "hook", "pluginInject", "directoryPlugin",
                        "pluginProbe", "dshYamlPatch", "copilotPlugin", "input", "activityIndicator",
                        "versionSource", "flusher"})
DEPLOY_BLOCKS = {"hook": "hook", "plugin-inject": "pluginInject", "directory-plugin": "directoryPlugin",
                 "plugin-probe": "pluginProbe", "dsh-yaml-patch": "dshYamlPatch",
                 "copilot-plugin": "copilotPlugin"}
# Input types whose records Pilot's own hook or plugin writes as canonical JSONL (docs/agent-onboarding.md,
# "Emit Normalized Records Early"): hook-jsonl reads <logDir>/<id>-YYYY-MM-DD.jsonl, session-file-polling
# <logDir>/<filePattern> (DeepSeek Harness, Hermes).
JSONL_INPUTS = frozenset({"hook-jsonl", "session-file-polling"})
HOOK_FILES = "*-????-??-??.jsonl"  # BaseHookInput's daily <prefix>-YYYY-MM-DD.jsonl
DEFAULT_PILOT_DATA = "${LOONGSUITE_PILOT_DATA_DIR:-~/.loongsuite-pilot}"
IDLE_TIMEOUT_S = 1800  # Pilot's records carry no session end (its event names: docs/output-event-schema.md)
_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
_PATTERN = re.compile(r"^[A-Za-z0-9._*?\[\]-]{1,128}$")
_PILOT_DATA = re.compile(r"^(?:\$PILOT_DATA|\$\{PILOT_DATA\})(?=/|$)")
MAX_TEXT = 4096


@dataclass(frozen=True, slots=True)
class Conversion:
    """One Pilot definition: ``definition`` (ours, converted), or ``ours`` (the id of the definition we ship
    that is used instead), or neither with ``reasons``. ``notes``: fields not carried, one line each."""

    pilot_id: str
    definition: dict[str, Any] | None = None
    ours: str | None = None
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def converted(self) -> bool:
        return self.definition is not None or self.ours is not None


def is_pilot_definition(data: Mapping[str, Any]) -> bool:
    """A file of Pilot's: a key only Pilot's definitions have, and no ``parser`` (ours always has one)."""
    return "parser" not in data and any(key in PILOT_KEYS for key in data)


def field_of(line: str) -> str:
    """The JSON path a reason or note names (``"input.type 'x': ..."`` -> ``$.input.type``), else ``$``."""
    first = line.split(":", 1)[0].split(" ", 1)[0]
    return "$." + first if ":" in line and re.fullmatch(r"[A-Za-z][A-Za-z.]*", first) else "$"


@cache
def pilot_facts() -> dict[str, Any]:
    """``collector/data/loongsuite-pilot.json``: Pilot's ids that are other ids here, where it injects plugins."""
    return dict(orjson.loads(resources.files("collector").joinpath("data/loongsuite-pilot.json").read_bytes()))


def our_id(pilot_id: str) -> str:
    return str(pilot_facts()["aliases"]["ids"].get(pilot_id, pilot_id))


def convert(data: Mapping[str, Any], ours: Collection[str], pilot_data: str = DEFAULT_PILOT_DATA) -> Conversion:
    """``data``: one Pilot definition (hostile: every field is checked); ``ours``: the ids we ship;
    ``pilot_data``: what ``$PILOT_DATA`` stands for in the converted paths."""
    raw_id = data.get("id")
    if not isinstance(raw_id, str) or not _ID.match(raw_id):
        shown = raw_id[:64] if isinstance(raw_id, str) else type(raw_id).__name__
        return Conversion(str(shown), reasons=(f"id: {shown!r} is not an id (lowercase letters, digits, -)",))
    if our_id(raw_id) in ours:
        return Conversion(raw_id, ours=our_id(raw_id), notes=_ours_notes(data, our_id(raw_id)))
    glob, reasons = _glob(data.get("input"), pilot_data)
    if glob is None:
        return Conversion(raw_id, reasons=tuple(reasons))
    name = data.get("displayName")
    definition: dict[str, Any] = {
        "id": raw_id, "name": name[:200] if isinstance(name, str) and name.strip() else raw_id,
        "parser": "canonical", "detect": _detect(data.get("detection")), "integrations": [],
        "idle_timeout_s": IDLE_TIMEOUT_S,
        "sources": [{"kind": "jsonl", "name": "pilot-log", "globs": [glob]}],
        "notes": f"Converted from LoongSuite Pilot's definition (deployMode {_mode(data)!r}): reads the records "
                 "Pilot's own hook or plugin writes; Pilot's integration stays as it is.",
    }
    return Conversion(raw_id, definition=definition, notes=_notes(data))


def deploy_files(data: Mapping[str, Any]) -> list[str]:
    """The agent config files Pilot's definition edits (``hook.settingsPath``, ``pluginInject.configPaths``),
    as path templates; ones naming a variable Pilot expands itself (``$PI_CODING_AGENT_DIR``) are left out."""
    hook, inject = data.get("hook"), data.get("pluginInject")
    found = [hook.get("settingsPath")] if isinstance(hook, Mapping) else []
    if isinstance(inject, Mapping) and isinstance(inject.get("configPaths"), list):
        found += inject["configPaths"]
    return [f for f in found if isinstance(f, str) and f.startswith("~/") and "$" not in f and ".." not in f
            and len(f) <= MAX_TEXT][:16]


def _mode(data: Mapping[str, Any]) -> str:
    mode = data.get("deployMode")
    return mode[:64] if isinstance(mode, str) else "none"


def _glob(spec: Any, pilot_data: str) -> tuple[str | None, list[str]]:
    if spec is None:
        return None, ["input: none: Pilot reads this agent with code of its own, or not at all"]
    if not isinstance(spec, Mapping):
        return None, [f"input: must be an object, not {type(spec).__name__}"]
    kind = spec.get("type")
    if not isinstance(kind, str):
        return None, ["input.type: missing or not a string"]
    if "sqlite" in kind.lower():
        return None, [f"input.type {kind[:64]!r}: a SQLite reader is Pilot code (its query and row mapping are "
                      "TypeScript; the definition names only the database), nothing declarative to convert"]
    if kind not in JSONL_INPUTS:
        return None, [f"input.type {kind[:64]!r}: read by Pilot's own code (not records its hook writes); "
                      f"convertible: {', '.join(sorted(JSONL_INPUTS))}"]
    log_dir = spec.get("logDir")
    if not isinstance(log_dir, str) or not log_dir or len(log_dir) > MAX_TEXT:
        return None, [f"input.logDir: missing or not a path (input.type {kind!r})"]
    if not _PILOT_DATA.match(log_dir):
        return None, [f"input.logDir {log_dir[:200]!r}: not under $PILOT_DATA, so the agent's own files, in a "
                      "format only Pilot's code reads"]
    rest = _PILOT_DATA.sub("", log_dir).strip("/")
    if any(part in ("..", ".") for part in rest.split("/")) or "$" in rest or "\\" in rest:
        return None, [f"input.logDir {log_dir[:200]!r}: only plain folder names may follow $PILOT_DATA"]
    pattern = spec.get("filePattern", HOOK_FILES if kind == "hook-jsonl" else "*.jsonl")
    if not isinstance(pattern, str) or not _PATTERN.match(pattern) or ".." in pattern:
        return None, ["input.filePattern: must be a file name pattern (letters, digits, . _ - * ? [ ])"]
    return "/".join(p for p in (pilot_data.rstrip("/"), rest, pattern) if p), []


def _detect(spec: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    if isinstance(spec, Mapping):
        for key in ("paths", "commands"):
            value = spec.get(key)
            if isinstance(value, list):
                kept = [v for v in value if isinstance(v, str) and v and len(v) <= MAX_TEXT and "$" not in v]
                if kept:
                    out[key] = kept[:32]
    return out


def _notes(data: Mapping[str, Any]) -> tuple[str, ...]:
    notes = []
    for key in sorted(data):
        if key in ("id", "displayName", "input", "deployMode"):
            continue
        if key == "detection":
            kept = _detect(data[key])
            dropped = [k for k in ("paths", "commands") if isinstance(data[key], Mapping)
                       and data[key].get(k) and k not in kept]
            notes += [f"detection.{k}: not a list of plain paths or commands" for k in dropped]
        elif key in DEPLOY_BLOCKS.values():
            notes.append(f"{key}: Pilot's integration, left in place: it keeps writing what this definition reads "
                         "(agent-collector deploys nothing for it)")
        else:
            notes.append(f"{key}: no counterpart here")
    return tuple(notes)


def _ours_notes(data: Mapping[str, Any], ours: str) -> tuple[str, ...]:
    blocks = [key for key in sorted(data) if key in DEPLOY_BLOCKS.values()]
    return tuple(f"{key}: Pilot's integration; ours ({ours!r}, deployed by agent-collector install) replaces it"
                 for key in blocks)
