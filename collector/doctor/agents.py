"""Per detected agent: is our integration in place, will the agent load it, and do its hooks arrive?"""

from __future__ import annotations

import glob
import time
from pathlib import Path
from typing import Any

from collector.definitions import AgentDefinition, detect
from collector.doctor.model import Finding, error, ok, warn
from collector.doctor.plugin_policy import check_plugin_policy
from collector.paths import Paths

GAP_S = 15 * 60  # transcripts newer than the newest hook by this much: hooks are not arriving
RECENT_S = 7 * 86400  # only recent activity counts
_BAD = {"missing", "foreign_modified", "outdated", "untrusted", "conflict", "error"}
_TRANSCRIPT_KINDS = ("jsonl", "json_file")


def check_agents(definitions: dict[str, AgentDefinition], paths: Paths, daemon_up: bool,
                 now: float | None = None) -> list[Finding]:
    now = time.time() if now is None else now
    findings: list[Finding] = []
    detected = [d for d in definitions.values() if detect(d, paths).installed]
    if not detected:
        return [warn("agents", "no supported agent detected here",
                     "install an agent, or point --home at the home it lives in")]
    for defn in detected:
        findings += check_integration(defn, paths)
        findings += check_gap(defn, paths, now)
    return findings


def check_integration(defn: AgentDefinition, paths: Paths) -> list[Finding]:
    from collector.deploy import integration_state

    name = f"agent {defn.id}: integration"
    if not defn.integrations:
        return [ok(name, "nothing to install: its files are read as they are")]
    try:
        states = integration_state(defn, paths)
    except Exception as exc:  # noqa: BLE001 - one agent's broken config must not hide the others
        return [error(name, f"cannot read its configuration: {exc}", "fix the agent's config file named above")]
    out = []
    for state in states:
        if state.state.value in _BAD:
            out.append(error(name, f"{state.kind} {state.file}: {state.state.value.replace('_', ' ')}",
                             state.hint or f"`agent-collector install --agent {defn.id}`"))
        elif state.state.value == "not_implemented":
            out.append(warn(name, f"{state.kind}: {state.hint}", "collection relies on its files"))
    if out:
        return out
    findings = [ok(name, f"in place ({', '.join(s.kind for s in states)})")]
    for spec in defn.integrations:
        if spec["kind"] == "http_plugin_dir":
            findings += check_plugin_policy(defn.id, paths.expand(spec["dir"]))
    return findings


def newest_transcript(defn: AgentDefinition, paths: Paths) -> float | None:
    newest = None
    for source in defn.sources:
        if source.get("kind") not in _TRANSCRIPT_KINDS:
            continue
        for pattern in source.get("globs", []):
            for name in glob.glob(str(paths.expand(pattern))):
                mtime = _mtime(Path(name))
                newest = mtime if newest is None or (mtime or 0) > newest else newest
    return newest


def newest_hook(defn: AgentDefinition, paths: Paths) -> float | None:
    folder = paths.spool_dir / defn.id
    times = [m for m in (_mtime(p) for p in folder.glob("*.jsonl")) if m is not None] if folder.is_dir() else []
    return max(times) if times else None


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def in_place_since(defn: AgentDefinition, paths: Paths) -> float | None:
    """When our integration of ``defn`` was last written (its newest deploy record), or None if never."""
    from collector.deploy.records import RecordStore

    times = [r.updated_unix for r in RecordStore(paths).all(defn.id) if r.updated_unix > 0]
    return max(times) if times else None


def check_gap(defn: AgentDefinition, paths: Paths, now: float) -> list[Finding]:
    """A data gap is transcript activity, while our hooks were in place, with no hook event to match it.

    Activity from before the install (a new user's history) is no gap: hooks could not have seen it.
    """
    has_hooks = any(s.get("kind") == "spool" for s in defn.sources) and bool(defn.integrations)
    since = in_place_since(defn, paths)
    transcript = newest_transcript(defn, paths)
    if not has_hooks or since is None or transcript is None or transcript < max(now - RECENT_S, since):
        return []
    hook = newest_hook(defn, paths)
    name = f"agent {defn.id}: hooks"
    if hook is None or transcript - hook > GAP_S:
        since_text = "no hook event ever arrived" if hook is None else f"the last hook event arrived {_ago(now, hook)}"
        return [error(name, f"its sessions were active {_ago(now, transcript)}, after our hooks were put in place "
                      f"({_ago(now, since)}), but {since_text}: a data gap (tokens still come from the "
                      "transcripts; live status, permission waits and hook-only events are missing)",
                      f"start a new {defn.id} session (an agent loads its hooks when a session starts); if the "
                      "gap stays, look at the integration findings above, and with http hooks the daemon must "
                      "be running")]
    return [ok(name, f"hook events arriving (last {_ago(now, hook)})")]


def _ago(now: float, then: float) -> str:
    seconds = max(now - then, 0)
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago" if seconds < 172800 else f"{seconds / 86400:.0f} days ago"


def summary(findings: list[Finding]) -> dict[str, Any]:
    return {level: sum(1 for f in findings if f.level.value == level) for level in ("ok", "warn", "error")}
