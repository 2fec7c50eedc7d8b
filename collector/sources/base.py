"""What every source yields, and the counters it keeps."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from collector.model.raw import RawRecord


@dataclass(frozen=True, slots=True)
class Position:
    """Where a stream stands after a record: committed to the checkpoint store under ``stream``."""

    stream: str
    value: dict[str, Any]


# (record or None, position): None means "nothing to deliver, but the stream moved" (a skipped line).
Item = tuple[RawRecord | None, Position]


@dataclass(slots=True)
class SourceStats:
    records: int = 0
    bytes: int = 0
    malformed: int = 0
    oversized: int = 0
    truncations: int = 0
    rotations: int = 0
    errors: int = 0
    files: int = 0
    last_error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__slots__ if k != "extra"}
        out.update(self.extra)
        return out


@dataclass(frozen=True, slots=True)
class Scope:
    """What the next ``read`` of a file source looks at, when not every file (the daemon's cycles):
    ``changed``, the paths file events named since the last cycle (new ones among them are read too);
    ``sweep``, the share of the source's known files to ``stat`` as well, in turns (1.0: all of them),
    the safety net for an event that was lost; with ``sweep`` > 0 the folders are listed again (only
    those whose mtime moved) and files found new are read."""

    changed: frozenset[str] = frozenset()
    sweep: float = 1.0


@runtime_checkable
class Narrowable(Protocol):
    def narrow(self, scope: Scope | None) -> None:
        """The next ``read`` only: ``None`` reads every file (as ``collect --once`` does)."""


class Source(Protocol):
    name: str
    agent: str
    stats: SourceStats

    def read(self) -> AsyncIterator[Item]:
        """Yield what is available now, then stop. Called again when more may have arrived."""

    def watch_paths(self) -> list[str]:
        """Directories whose file events mean this source has something new."""
