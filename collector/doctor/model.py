"""A doctor finding: what was checked, how it went, what to do about it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class Level(StrEnum):
    OK = "ok"
    WARN = "warn"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Finding:
    check: str  # e.g. "daemon", "agent claude-code: integration"
    level: Level
    message: str
    fix: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "level": self.level.value}


def ok(check: str, message: str) -> Finding:
    return Finding(check, Level.OK, message)


def warn(check: str, message: str, fix: str) -> Finding:
    return Finding(check, Level.WARN, message, fix)


def error(check: str, message: str, fix: str) -> Finding:
    return Finding(check, Level.ERROR, message, fix)
