"""Install, uninstall and inspect an agent's integrations, file by file.

For one file: the *baseline* is the file without our entries (from the deploy record when the file
still holds exactly what we wrote, else by stripping our entries structurally); the new content is the
baseline with our entries applied. Writing only when that differs makes install idempotent; restoring
the baseline makes uninstall byte-identical when nobody else touched the file in between.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from collector.definitions.loader import AgentDefinition
from collector.deploy.file_edit import Check, FileEdit
from collector.deploy.fsutil import (
    missing_parents,
    read_or_none,
    remove_empty_dirs,
    remove_file,
    write_atomic,
)
from collector.deploy.kinds import edits_for
from collector.deploy.model import (
    Action,
    Change,
    Conflict,
    DeployError,
    IntegrationStatus,
    NotImplementedKind,
    State,
)
from collector.deploy.records import DeployRecord, RecordStore
from collector.deploy.telemetry_choice import integrations_for
from collector.deploy.trust import trust_stores
from collector.paths import Paths

log = logging.getLogger(__name__)

_WORST = ["ok", "outdated", "missing", "partial", "conflict"]


def _group_by_file(edits: Iterable[FileEdit]) -> dict[Path, list[FileEdit]]:
    out: dict[Path, list[FileEdit]] = {}
    for edit in edits:
        out.setdefault(edit.path, []).append(edit)
    return out


def _agent_edits(
    defn: AgentDefinition, paths: Paths, hook_script: Path | None
) -> tuple[dict[Path, list[FileEdit]], list[Change]]:
    edits: list[FileEdit] = []
    problems: list[Change] = []
    for spec in integrations_for(defn, paths):
        try:
            edits.extend(edits_for(defn.id, spec, paths, hook_script))
        except DeployError as exc:
            label = spec.get("file") or spec.get("dir") or spec["kind"]
            problems.append(Change(defn.id, label, Action.ERROR, str(exc)))
    return _group_by_file(edits), problems


def _strip_all(edits: list[FileEdit], current: bytes | None) -> bytes | None:
    for edit in reversed(edits):
        current = edit.strip(current)
    return current


def _baseline(store: RecordStore, record: DeployRecord | None, current: bytes | None,
              edits: list[FileEdit]) -> bytes | None:
    if record is not None and record.holds_what_we_wrote(current):
        try:
            return store.baseline(record)
        except FileNotFoundError as exc:
            log.warning("%s; removing our entries structurally instead", exc)
    return _strip_all(edits, current)


def _install_file(
    agent: str, path: Path, edits: list[FileEdit], store: RecordStore, dry_run: bool
) -> Change:
    try:
        current = read_or_none(path)
        record = store.load(agent, path)
        baseline = _baseline(store, record, current, edits)
        new, conflicts = baseline, []
        for edit in edits:
            try:
                new = edit.apply(new)
            except Conflict as exc:
                conflicts.append(str(exc))
    except (DeployError, OSError) as exc:
        return Change(agent, str(path), Action.ERROR, _reason(exc, path), dry_run)
    specs = [edit.spec for edit in edits]
    if new == current:
        if not dry_run:
            if new == baseline and record is not None:
                store.delete(record)  # nothing of ours is in this file
            elif new != baseline and (record is None or not record.holds_what_we_wrote(current)):
                store.save(agent, path, specs, baseline, current, [])
        if conflicts:
            return Change(agent, str(path), Action.CONFLICT, "; ".join(conflicts), dry_run)
        return Change(agent, str(path), Action.UNCHANGED, "already in place", dry_run)
    created = missing_parents(path) if current is None else []
    try:
        if not dry_run:
            if new is None:
                remove_file(path)
            else:
                write_atomic(path, new, mode=_new_file_mode(edits),
                             private=any(getattr(e, "private", False) for e in edits))
            store.save(agent, path, specs, baseline, new, created)
    except OSError as exc:
        return Change(agent, str(path), Action.ERROR, _reason(exc, path), dry_run)
    summary = _describe(edits, created)
    if conflicts:
        summary += "; " + "; ".join(conflicts)
    return Change(agent, str(path), Action.CREATE if current is None else Action.UPDATE, summary, dry_run)


def _new_file_mode(edits: list[FileEdit]) -> int | None:
    """The mode a file we create gets: an edit's ``mode`` (hook executables), else the default."""
    modes = [m for m in (getattr(e, "mode", None) for e in edits) if isinstance(m, int)]
    return max(modes) if modes else None


def _reason(exc: Exception, path: Path) -> str:
    if isinstance(exc, OSError):
        return f"{path}: {exc.strerror or exc}"
    return str(exc)


def _describe(edits: list[FileEdit], created: list[Path]) -> str:
    parts = []
    for edit in edits:
        kind = edit.spec["kind"]
        if kind in ("settings_hooks", "flat_hooks"):
            parts.append(f"hooks for {len(edit.spec['events'])} events")
        elif kind == "hooks_dir":
            parts.append(f"hook executable {edit.path.name}")
        elif kind == "telemetry_settings":
            parts.append("telemetry pointed at agent-collector")
        elif kind == "toml_notify":
            parts.append(f"{edit.spec['key']} = agent-collector hook")
        elif kind in ("dropin_plugin", "plugin_inject") and edit.path.name == Path(edit.spec["asset"]).name:
            parts.append("plugin file")
        elif "list_key" in edit.spec:
            parts.append(f"plugin listed in {edit.spec['list_key']}")
        else:
            parts.append(f"plugin file {edit.path.name}")
    if created:
        parts.append("created " + ", ".join(str(d) for d in created))
    return ", ".join(parts)


def _uninstall_file(
    agent: str, path: Path, edits: list[FileEdit], store: RecordStore, dry_run: bool, dirs: list[Path]
) -> Change:
    record = store.load(agent, path)
    try:
        current = read_or_none(path)
        how = "removed our entries (the file changed since we wrote it; other changes kept)"
        if record is not None and record.holds_what_we_wrote(current):
            try:
                target = store.baseline(record)
                how = "restored the original bytes" if target is not None else "deleted (we created it)"
            except FileNotFoundError:
                target = _strip_all(edits, current)
        else:
            target = _strip_all(edits, current)
    except (DeployError, OSError) as exc:
        return Change(agent, str(path), Action.ERROR, _reason(exc, path), dry_run)
    if target == current:
        if record is not None and not dry_run:
            if current is None:  # the file is gone already: the folders we created for it go too
                dirs.extend(Path(d) for d in record.created_dirs)
            store.delete(record)
        return Change(agent, str(path), Action.UNCHANGED, "nothing of ours", dry_run)
    try:
        if not dry_run:
            if target is None:
                remove_file(path)
            else:
                write_atomic(path, target)
            if target is None and record is not None:
                dirs.extend(Path(d) for d in record.created_dirs)  # removed once every file is done
            if record is not None:
                store.delete(record)
    except OSError as exc:
        return Change(agent, str(path), Action.ERROR, _reason(exc, path), dry_run)
    action = Action.DELETE if target is None else Action.RESTORE if "restored" in how else Action.UPDATE
    return Change(agent, str(path), action, how, dry_run)


def install_agent(
    defn: AgentDefinition, paths: Paths, hook_script: Path | None = None, dry_run: bool = False
) -> list[Change]:
    """Deploy every integration of ``defn``; one Change per file (errors included, never raised). An
    integration is deployed whole or not at all: when one of its files cannot take our part (the user's own
    hook executable where ours would go, a file we cannot parse or write), none of its files is written and
    the blocking file says why, so an agent is never left half-hooked (its sessions are still read from its
    own files); the agent's other integrations go on."""
    by_file, problems = _agent_edits(defn, paths, hook_script)
    store = RecordStore(paths)
    planned = {p: _install_file(defn.id, p, e, store, True) for p, e in by_file.items()}
    blocked = {id(e.spec) for p, c in planned.items() if c.action in _BLOCKING for e in by_file[p]}
    changes = list(problems)
    for path, edits in by_file.items():
        plan = planned[path]
        if plan.action in _BLOCKING:
            changes.append(_not_deployed(plan, edits, by_file, dry_run))
        elif blocked and any(id(e.spec) in blocked for e in edits):
            continue  # part of an integration another of whose files is blocked: not written
        else:
            changes.append(plan if dry_run else _install_file(defn.id, path, edits, store, False))
    return changes + _remove_other_variants(defn.id, by_file, paths, hook_script, store, dry_run)


_BLOCKING = (Action.ERROR, Action.CONFLICT)


def _not_deployed(plan: Change, edits: list[FileEdit], by_file: dict[Path, list[FileEdit]], dry_run: bool) -> Change:
    """The blocking file's change; when its integration has other files, it says they were not written."""
    specs = {id(e.spec) for e in edits}
    others = [p for p, es in by_file.items() if str(p) != plan.file and any(id(e.spec) in specs for e in es)]
    if not others:
        return plan
    return Change(plan.agent, plan.file, plan.action, f"{plan.summary}; so none of that integration's "
                  f"{len(others) + 1} files was written (its sessions are still read from its own files)", dry_run)


def _remove_other_variants(agent: str, keep: dict[Path, list[FileEdit]], paths: Paths, hook_script: Path | None,
                           store: RecordStore, dry_run: bool) -> list[Change]:
    """A file we deployed into earlier that the chosen integrations no longer use (the user switched
    variants, e.g. from settings.json hooks to the plugin): take our entries out of it."""
    stale = [r for r in store.all(agent) if r.path not in keep]
    dirs: list[Path] = []
    out = [_uninstall_file(agent, r.path, _edits_from_record(r, paths, hook_script), store, dry_run, dirs)
           for r in stale]
    remove_empty_dirs(dirs)
    return out


def repair_file(
    defn: AgentDefinition, paths: Paths, file: Path, hook_script: Path | None = None
) -> list[Change]:
    """Re-apply the integrations that write into ``file`` (the watchdog's repair): every file of each,
    so a plugin whose directory was deleted gets its manifest back with its hooks, not the hooks alone."""
    by_file, _ = _agent_edits(defn, paths, hook_script)
    specs = [id(e.spec) for e in by_file.get(file, [])]
    store = RecordStore(paths)
    return [_install_file(defn.id, p, e, store, False) for p, e in by_file.items()
            if any(id(x.spec) in specs for x in e)]


def uninstall_agent(
    defn: AgentDefinition | str, paths: Paths, hook_script: Path | None = None, dry_run: bool = False
) -> list[Change]:
    """Remove our entries from every file of the agent's definition and every file we have a record of."""
    agent = defn if isinstance(defn, str) else defn.id
    store = RecordStore(paths)
    by_file: dict[Path, list[FileEdit]] = {}
    changes: list[Change] = []
    if not isinstance(defn, str):
        by_file, problems = _agent_edits(defn, paths, hook_script)
        changes += [c for c in problems if "not implemented" not in c.summary]
    for record in store.all(agent):
        if record.path not in by_file:
            by_file[record.path] = _edits_from_record(record, paths, hook_script)
    dirs: list[Path] = []
    changes += [_uninstall_file(agent, p, e, store, dry_run, dirs) for p, e in by_file.items()]
    removed = remove_empty_dirs(dirs)
    if removed:
        shown = ", ".join(str(d) for d in sorted(removed))
        changes.append(Change(agent, shown, Action.DELETE, "removed folders we had created", dry_run))
    return changes


def _edits_from_record(record: DeployRecord, paths: Paths, hook_script: Path | None) -> list[FileEdit]:
    out: list[FileEdit] = []
    for spec in record.specs:
        try:
            out.extend(e for e in edits_for(record.agent, spec, paths, hook_script) if e.path == record.path)
        except DeployError:
            continue
    return out


def deployed_files(paths: Paths, agent: str | None = None) -> list[Path]:
    return [record.path for record in RecordStore(paths).all(agent)]


def integration_state(
    defn: AgentDefinition, paths: Paths, hook_script: Path | None = None
) -> list[IntegrationStatus]:
    """One status per integration of ``defn``: in place, missing, foreign-modified, untrusted..."""
    store = RecordStore(paths)
    out = []
    for spec in integrations_for(defn, paths):
        out.append(_spec_state(defn.id, spec, paths, hook_script, store))
    return out


def _spec_state(agent: str, spec: dict[str, Any], paths: Paths, hook_script: Path | None,
                store: RecordStore) -> IntegrationStatus:
    label = spec.get("file") or spec.get("dir") or ""
    try:
        edits = edits_for(agent, spec, paths, hook_script)
    except NotImplementedKind as exc:
        return IntegrationStatus(agent, spec["kind"], label, State.NOT_IMPLEMENTED, str(exc))
    except DeployError as exc:
        return IntegrationStatus(agent, spec["kind"], label, State.ERROR, str(exc))
    file = str(edits[-1].path)
    files = tuple(str(edit.path) for edit in edits)
    try:
        checks = [(edit, edit.check(read_or_none(edit.path))) for edit in edits]
    except (DeployError, OSError) as exc:
        return IntegrationStatus(agent, spec["kind"], file, State.ERROR, _reason(exc, edits[-1].path), files)
    worst: Check = max((c for _, c in checks), key=lambda c: _WORST.index(c.level))
    recorded = any(store.load(agent, edit.path) is not None for edit, _ in checks)
    state, hint = _state_of(worst, recorded, agent)
    if state is State.IN_PLACE and spec.get("trust", {}).get("store"):
        state, hint = _trust_state(edits[-1].path, paths, spec["trust"], hint)
    return IntegrationStatus(agent, spec["kind"], file, state, hint, files)


def _state_of(check: Check, recorded: bool, agent: str) -> tuple[State, str]:
    if check.level == "ok":
        return State.IN_PLACE, check.hint
    if check.level == "conflict":
        return State.CONFLICT, check.hint
    if check.level == "outdated":
        return State.OUTDATED, f"{check.hint}; `agent-collector install --agent {agent}` updates them"
    if recorded:
        return State.FOREIGN_MODIFIED, (
            f"another program removed or changed our entries: {check.hint}; the watchdog puts them back, "
            f"or run `agent-collector install --agent {agent}`"
        )
    return State.MISSING, f"not installed ({check.hint}); run `agent-collector install --agent {agent}`"


def _trust_state(hooks_file: Path, paths: Paths, trust: dict[str, Any], hint: str) -> tuple[State, str]:
    """Hooks in place may still not run: ask the agent's trust store (named by the integration)."""
    try:
        check = trust_stores().build(trust["store"], trust, paths)
    except (LookupError, ValueError) as exc:
        return State.ERROR, str(exc)
    result = check(hooks_file)
    if result.error:
        return State.ERROR, result.hint
    if result.trusted:
        return State.IN_PLACE, f"{hint}; {result.hint}"
    return State.UNTRUSTED, result.hint
