"""What deploy operations report: changes made (or planned) and the state of each integration."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class DeployError(Exception):
    """A file we must not or cannot edit (unparseable, wrong shape, in the way); nothing was written."""


class Conflict(Exception):
    """Another program owns what we would change (e.g. Codex `notify`); we leave it and report."""


class NotImplementedKind(DeployError):
    """An integration kind this version cannot deploy yet."""


class State(StrEnum):
    IN_PLACE = "in_place"
    MISSING = "missing"
    FOREIGN_MODIFIED = "foreign_modified"
    OUTDATED = "outdated"
    UNTRUSTED = "untrusted"
    CONFLICT = "conflict"
    ERROR = "error"
    NOT_IMPLEMENTED = "not_implemented"


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    RESTORE = "restore"
    DELETE = "delete"
    UNCHANGED = "unchanged"
    CONFLICT = "conflict"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Change:
    agent: str
    file: str
    action: Action
    summary: str
    dry_run: bool = False

    @property
    def failed(self) -> bool:
        return self.action is Action.ERROR

    def __str__(self) -> str:
        verb = self.action.value
        if self.dry_run and self.action not in _PASSIVE:
            verb = f"would {verb}"
        return f"{self.agent}: {verb} {self.file}: {self.summary}"


_PASSIVE = {Action.UNCHANGED, Action.CONFLICT, Action.ERROR}


@dataclass(frozen=True, slots=True)
class IntegrationStatus:
    agent: str
    kind: str
    file: str
    state: State
    hint: str
    files: tuple[str, ...] = ()  # every file the integration writes (``file`` is the last of them)

    @property
    def covers(self) -> tuple[str, ...]:
        return self.files or (self.file,)

    @property
    def needs_repair(self) -> bool:
        """Our entries were installed and someone removed or changed them."""
        return self.state is State.FOREIGN_MODIFIED

    @property
    def summary(self) -> str:
        return f"{self.kind}: {self.state.value.replace('_', ' ')}"

    def as_dict(self) -> dict[str, str]:
        return {"agent": self.agent, "kind": self.kind, "file": self.file, "state": self.state.value,
                "hint": self.hint, "summary": self.summary}


@dataclass(frozen=True, slots=True)
class TrustResult:
    """What a trust store says about our deployed hooks: will the agent run them, and what to tell the user."""

    trusted: bool
    hint: str
    error: bool = False  # the store could not be read: the state is unknown
