"""Global custom attributes: the same key/value pairs on every entry the collector emits.

Three sources, a later one winning for a key: the config's ``[attributes]`` table, the daemon's
environment (``OTEL_RESOURCE_ATTRIBUTES``, then ``OTEL_SPAN_ATTRIBUTES``, both ``k=v,k2=v2`` with
percent-escapes, ``collector.util.kv_pairs``), and the live file ``<config dir>/attributes.json`` that
``agent-collector attributes set|unset`` writes (a JSON object of strings). The live file is checked by its
modification time, size and inode once per batch (``refresh``) and read again when they moved, so a change
shows from the next batch on, without a restart; a file that is not such an object (or too large, or not a
regular file) is logged once per change, counted in ``problems`` and treated as empty until it is fixed.

An attribute only fills a key the entry does not have (the agent's and the collector's own fields win), and
a key in the collector's namespaces (``RESERVED``) or one that is not a plain name is refused, counted. The
keys a stamp added are listed in the entry's ``collector.custom_attributes``, so the trace exporter can put
them on the turn's spans.

``EntryStamper`` is what the pipeline runs on every entry before the correlator (this module's
``GlobalAttributes``, ``collector.pipeline.git_attributes.GitAttributes``, and any other stamp that adds
fields of its own): ``apply(entry)`` adds fields in place; a stamp with a ``refresh()`` method has it
called at the start of every batch.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson

from collector.util.kv_pairs import parse_pairs
from collector.util.regular import read_regular

log = logging.getLogger(__name__)

FILE_NAME = "attributes.json"
MAX_FILE_BYTES = 256 * 1024
MAX_ATTRIBUTES = 128
MAX_VALUE = 512  # LoongSuite Pilot's bound on a stamped value
ENV_VARIABLES = ("OTEL_RESOURCE_ATTRIBUTES", "OTEL_SPAN_ATTRIBUTES")
MARK = "collector.custom_attributes"  # the keys a stamp of custom attributes added to the entry (spans carry them)
KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,127}$")
RESERVED = ("gen_ai.", "event.", "session.", "collector.", "schema.", "turn.", "vcs.", "git.", "workspace.",
            "tool.", "masking.", "agent.", "compaction.", "prompt.", "source.", "llm.", "subagent.", "upstream.",
            "agent_collector.")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ufffd]")  # also what a percent escape decodes to
RESERVED_KEYS = frozenset({"time_unix_nano", "observed_time_unix_nano", "user.id", "host.name", "duration_ms",
                           "error.type", "error.message", "http.response.status_code"})


class EntryStamper(Protocol):
    def apply(self, entry: dict[str, Any]) -> None:
        """Add this stamp's fields to ``entry`` in place."""


def attribute_file(config_dir: Path) -> Path:
    return config_dir / FILE_NAME


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be a custom attribute, or None."""
    if not KEY.match(key):
        return "not a plain name (letters, digits, '_', '.', '-'; at most 128)"
    if key in RESERVED_KEYS or key.startswith(RESERVED):
        return "a name the collector sets itself"
    return None


def pair_problem(key: Any, value: Any) -> str | None:
    """Why ``key = value`` cannot be a custom attribute, or None."""
    if not isinstance(key, str):
        return "not a string key"
    if (reason := key_problem(key)) is not None:
        return reason
    if not isinstance(value, str):
        return "its value is not a string"
    if len(value) > MAX_VALUE:
        return f"its value is longer than {MAX_VALUE} characters"
    if _CONTROL.search(value):
        return "its value holds a control character"
    return None


def checked(pairs: Mapping[str, Any], where: str, problems: dict[str, int]) -> dict[str, str]:
    """The usable pairs; each refused one counted in ``problems`` under ``"<where>: <reason>"``."""
    out: dict[str, str] = {}
    for key, value in pairs.items():
        reason = pair_problem(key, value)
        if reason is None and len(out) >= MAX_ATTRIBUTES:
            reason = f"more than {MAX_ATTRIBUTES} attributes"
        if reason is not None:
            _count(problems, f"{where}: {str(key)[:64]!r} {reason}")
            continue
        out[key] = value
    return out


def from_environment(env: Mapping[str, str], problems: dict[str, int]) -> dict[str, str]:
    """``OTEL_RESOURCE_ATTRIBUTES`` then ``OTEL_SPAN_ATTRIBUTES`` (a malformed variable is discarded whole)."""
    out: dict[str, str] = {}
    for name in ENV_VARIABLES:
        text = env.get(name)
        if not text:
            continue
        try:
            out.update(checked(parse_pairs(text), name, problems))
        except ValueError as exc:
            _count(problems, f"{name}: discarded, {exc}")
    return out


def read_file(path: Path) -> dict[str, str]:
    """The live file's pairs ({} when it is missing); ValueError when it is there but not usable."""
    if not path.exists():
        return {}
    data = read_regular(str(path), MAX_FILE_BYTES + 1)
    if data is None:
        raise ValueError("not a readable regular file")
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"larger than {MAX_FILE_BYTES} bytes")
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError("not a JSON object of strings")
    return value


@dataclass(slots=True)
class LiveFile:
    """The live attribute file, read again when its (mtime, size, inode) moved."""

    path: Path
    problems: dict[str, int]
    pairs: dict[str, str] = field(default_factory=dict)
    stamp: tuple[int, int, int] | None = None

    def current(self) -> dict[str, str]:
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = (-1, -1, -1)
        if stamp != self.stamp:
            self.stamp = stamp
            self.pairs = self._load()
        return self.pairs

    def _load(self) -> dict[str, str]:
        try:
            return checked(read_file(self.path), str(self.path), self.problems)
        except ValueError as exc:
            reason = f"{self.path}: {exc}"
            _count(self.problems, reason)
            log.warning("custom attributes: %s; the file's attributes are left out until it is fixed", reason)
            return {}


class GlobalAttributes:
    """Fills the global custom attributes into every entry (``apply``); ``refresh`` (the pipeline calls it
    once per batch) looks at the live file, so a change shows from the next batch on."""

    def __init__(self, configured: Mapping[str, str], env: Mapping[str, str], live: Path | None) -> None:
        self.problems: dict[str, int] = {}
        self.fixed = {**checked(configured, "[attributes]", self.problems),
                      **from_environment(env, self.problems)}
        self.live = LiveFile(live, self.problems) if live is not None else None
        self._merged = dict(self.fixed)
        for reason in self.problems:
            log.warning("custom attributes: %s (left out)", reason)
        self.refresh()

    def refresh(self) -> None:
        """Read the live file again if it changed (one ``stat``)."""
        if self.live is not None:
            self._merged = {**self.fixed, **self.live.current()}

    def current(self) -> dict[str, str]:
        """The merged attributes as of the last ``refresh``."""
        return self._merged

    def apply(self, entry: dict[str, Any]) -> None:
        stamp(entry, self._merged)


def stamp(entry: dict[str, Any], pairs: Mapping[str, str]) -> None:
    """Fill ``pairs`` into ``entry`` where it has no such key; the keys added are named in ``MARK``."""
    added = [key for key in pairs if key not in entry]
    if not added:
        return
    for key in added:
        entry[key] = pairs[key]
    known = entry.get(MARK)
    entry[MARK] = sorted({*(known if isinstance(known, list) else ()), *added})


def _count(problems: dict[str, int], reason: str) -> None:
    problems[reason] = problems.get(reason, 0) + 1
