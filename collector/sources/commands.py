"""The ``command`` source: CLI polling. A program (``argv``, no shell) runs every ``interval_s`` with
the bounds of :mod:`collector.sources.process`; what it prints (:mod:`collector.sources.json_output`)
becomes records of kind ``record_kind`` for the agent's parser. With ``each``, every new record of the
first program names a second run (a list of sessions, then one export per session), whose output makes
the records.

Incremental: with ``cursor.field`` the records (the listed ones with ``each``) are read in the order of
that field, and only those beyond the stored cursor (``{"cursor": value, "keys": [...]}``: the largest
value and the ``cursor.key`` of the records that had it, so records sharing it are not read twice). The
position moves with the yielded items and the Service commits it after export, like every source's. The
program gets the cursor back as ``{cursor}`` in ``argv`` and as ``AGENT_COLLECTOR_CURSOR``, so it can
print only what is new itself.

Failures (cannot start, non-zero exit, timeout, output over the cap) count towards the circuit breaker
(:mod:`collector.sources.breaker`); the source's status shows the last run, its exit code, time, records
and the breaker. Breaker state is the daemon's memory: a restart polls at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from collector.definitions import AgentDefinition
from collector.definitions.schema import kind_schema
from collector.model.raw import RawRecord
from collector.registry import Plugin
from collector.sources.base import Item, Position, SourceStats
from collector.sources.breaker import Breaker
from collector.sources.context import BuildContext, SourceBuilder
from collector.sources.json_output import parse_output
from collector.sources.process import Limits, ProcessResult, run_bounded

log = logging.getLogger(__name__)

CURSOR_ENV = "AGENT_COLLECTOR_CURSOR"
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")
Runner = Callable[..., ProcessResult]


class PlaceholderError(ValueError):
    """An argv placeholder names a field the record does not have."""


@dataclass(frozen=True, slots=True)
class CommandSpec:
    argv: tuple[str, ...]
    limits: Limits
    interval_s: float
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    records: str | None = None
    record_kind: str = "command"
    cursor_field: str | None = None
    cursor_key: str | None = None
    each_argv: tuple[str, ...] = ()
    each_records: str | None = None
    failures_to_open: int = 3
    max_backoff_s: float = 3600.0


@dataclass(slots=True)
class Cursor:
    value: Any = None
    keys: list[str] = field(default_factory=list)

    def as_value(self) -> dict[str, Any]:
        return {"cursor": self.value, "keys": list(self.keys)}

    def is_new(self, value: Any, key: str | None) -> bool:
        if self.value is None or value is None or type(value) is not type(self.value):
            return True
        try:
            if value != self.value:
                return bool(value > self.value)
        except TypeError:
            return True
        return key is None or key not in self.keys

    def advance(self, value: Any, key: str | None) -> Cursor:
        if value is None:
            return self
        if value == self.value:
            return Cursor(value, self.keys + ([key] if key is not None else []))
        return Cursor(value, [key] if key is not None else [])


class CommandSource:
    def __init__(self, name: str, agent: str, spec: CommandSpec, positions: dict[str, dict[str, Any]],
                 clock: Callable[[], float] = time.monotonic, runner: Runner = run_bounded) -> None:
        self.name = name
        self.agent = agent
        self.spec = spec
        self.stats = SourceStats()
        self.stats.extra.update(kind="command", runs=0, failures=0, last_run=None, last_exit_code=None,
                                last_duration_ms=None, last_records=None)
        self.breaker = Breaker(spec.interval_s, spec.failures_to_open, spec.max_backoff_s)
        stored = positions.get(name) or {}
        self._cursor = Cursor(stored.get("cursor"), list(stored.get("keys") or []))
        self._clock = clock
        self._runner = runner

    def watch_paths(self) -> list[str]:
        return []  # polled: nothing to watch

    async def read(self) -> AsyncIterator[Item]:
        now = self._clock()
        self.stats.extra.update(self.breaker.state(now))
        if not self.breaker.due(now):
            return
        items: list[Item] = []
        ok = await self._poll(items)
        finished = self._clock()
        (self.breaker.succeeded if ok else self.breaker.failed)(finished)
        self.stats.extra.update(self.breaker.state(finished))
        if not ok and self.breaker.open:
            log.warning("%s: %d failures in a row; next poll in %.0fs", self.name, self.breaker.failures,
                        self.breaker.wait_s())
        for item in items:
            yield item

    async def _poll(self, items: list[Item]) -> bool:
        cursor = self._cursor
        result = await self._run(self.spec.argv, {"cursor": _text(cursor.value)})
        if result is None:
            return False
        listed = self._records(result, self.spec.records)
        ordered = sorted(listed, key=self._order) if self.spec.cursor_field else listed
        records, ok = 0, True
        for data in ordered:
            value, key = self._cursor_of(data)
            if self.spec.cursor_field and not cursor.is_new(value, key):
                continue
            after = cursor.advance(value, key)
            if self.spec.each_argv:
                done = await self._each(data, cursor, after, items)
                if done is None:
                    ok = False
                    break  # the cursor stays before the record whose run failed: read again next time
                records += done
            else:
                items.append((self._record(data, after), Position(self.name, after.as_value())))
                records += 1
            cursor = after
        self._cursor = cursor
        self.stats.extra["last_records"] = records
        return ok

    async def _each(self, listed: dict[str, Any], before: Cursor, after: Cursor, items: list[Item]) -> int | None:
        values = {"cursor": _text(before.value), **_fields(listed)}
        try:
            fill_argv(self.spec.each_argv, values)
        except PlaceholderError as exc:  # this record's fields cannot make a safe command: skip it, once
            self.stats.malformed += 1
            self.stats.last_error = f"{os.path.basename(self.spec.each_argv[0])}: a listed record skipped: {exc}"
            log.warning("%s: %s", self.name, self.stats.last_error)
            items.append((None, Position(self.name, after.as_value())))
            return 0
        result = await self._run(self.spec.each_argv, values)
        if result is None:
            return None
        records = self._records(result, self.spec.each_records)
        for data in records:
            items.append((self._record(data, before), Position(self.name, before.as_value())))
        items.append((None, Position(self.name, after.as_value())))
        return len(records)

    async def _run(self, template: tuple[str, ...], values: dict[str, str]) -> ProcessResult | None:
        """One run; None (counted, logged) when it failed."""
        try:
            argv = fill_argv(template, values)
        except PlaceholderError as exc:
            self._failed(f"{template[0]}: {exc}", None)
            return None
        env = {**os.environ, **self.spec.env, CURSOR_ENV: values["cursor"]}
        result = await asyncio.to_thread(self._runner, argv, self.spec.limits, env, self.spec.cwd)
        self.stats.extra.update(runs=self.stats.extra["runs"] + 1, last_run=time.time(),
                                last_exit_code=result.exit_code, last_duration_ms=round(result.duration_s * 1000))
        if not result.ok:
            self._failed(f"{os.path.basename(argv[0])}: {result.reason()}", result)
            return None
        self.stats.bytes += len(result.stdout)
        return result

    def _records(self, result: ProcessResult, path: str | None) -> list[dict[str, Any]]:
        parsed = parse_output(result.stdout, path)
        if parsed.malformed:
            self.stats.malformed += parsed.malformed
            log.warning("%s: %d values of the output are not JSON objects; skipped", self.name, parsed.malformed)
        return parsed.records

    def _record(self, data: dict[str, Any], position: Cursor) -> RawRecord:
        self.stats.records += 1
        meta = {"program": os.path.basename(self.spec.argv[0])}
        return RawRecord(self.agent, self.spec.record_kind, data, self.name, _text(position.value),
                         time.time_ns(), meta)

    def _cursor_of(self, data: dict[str, Any]) -> tuple[Any, str | None]:
        value = _get(data, self.spec.cursor_field) if self.spec.cursor_field else None
        key = _get(data, self.spec.cursor_key) if self.spec.cursor_key else None
        return value, None if key is None else str(key)

    def _order(self, data: dict[str, Any]) -> tuple[int, Any]:
        value = self._cursor_of(data)[0]
        return (0, value) if isinstance(value, (int, float)) else (1, str(value))

    def _failed(self, reason: str, result: ProcessResult | None) -> None:
        self.stats.errors += 1
        self.stats.extra["failures"] += 1
        self.stats.last_error = reason
        if result is not None and result.error is None:
            self.stats.extra["last_exit_code"] = result.exit_code
        log.warning("%s: %s", self.name, reason)


def _get(data: dict[str, Any], path: str) -> Any:
    value: Any = data
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _fields(data: dict[str, Any]) -> dict[str, str]:
    return {k: _text(v) for k, v in data.items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)}


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def fill_argv(template: Sequence[str], values: dict[str, str]) -> list[str]:
    """The argv with its placeholders filled. A value that fills a whole argument and starts with ``-``
    would be read as an option (a record's id ``--output=/etc/x``, say): refused unless the template puts
    ``--`` before it (the end of options for most programs)."""
    argv: list[str] = []
    options_end = False
    for index, arg in enumerate(template):
        filled = _fill(arg, values)
        if index and not options_end and arg.startswith("{") and filled.startswith("-"):
            raise PlaceholderError(f"the value of {arg} ({filled[:40]!r}) starts with '-' and would be read as an "
                                   f"option; put \"--\" before it in argv")
        options_end = options_end or arg == "--"
        argv.append(filled)
    return argv


def _fill(arg: str, values: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise PlaceholderError(f"placeholder {{{name}}} has no value")
        return values[name]

    return _PLACEHOLDER.sub(one, arg)


def spec_of(spec: dict[str, Any], ctx: BuildContext) -> CommandSpec:
    each = spec.get("each") or {}
    cursor = spec.get("cursor") or {}
    limits = Limits(float(spec["timeout_s"]), int(spec["max_output_bytes"]), int(spec["max_stderr_bytes"]))
    return CommandSpec(
        argv=(_program(spec["argv"][0], ctx), *spec["argv"][1:]), limits=limits, interval_s=float(spec["interval_s"]),
        cwd=str(ctx.paths.expand(spec["cwd"])) if spec.get("cwd") else None, env=dict(spec.get("env") or {}),
        records=spec.get("records"), record_kind=spec["record_kind"], cursor_field=cursor.get("field"),
        cursor_key=cursor.get("key"), each_argv=tuple(each.get("argv") or ()), each_records=each.get("records"),
        failures_to_open=int(spec["failures_to_open"]), max_backoff_s=float(spec["max_backoff_s"]),
    )


def _program(program: str, ctx: BuildContext) -> str:
    """``~`` and ``${VAR}`` in the program's path are expanded; a bare name is looked up on PATH."""
    return str(ctx.paths.expand(program)) if program.startswith(("~", "$", "/")) else program


def _build(spec: dict[str, Any], defn: AgentDefinition, ctx: BuildContext) -> CommandSource:
    return CommandSource(f"{defn.id}:{spec['name']}", defn.id, spec_of(spec, ctx), ctx.positions)


PLUGIN: Plugin[SourceBuilder] = Plugin("command", _build, kind_schema("source_command"))
