"""The hostile-input sweep's generator (issue 34): from an agent's definition and a real fixture home, every
place its sources read (spool and JSONL lines, JSON documents, SQLite rows and the JSON inside their
columns), and one mutation at a time of one field or column to another type.

Nothing here knows an agent: the sources come from the definition (its globs, database path, tables,
watermark, key and columns), the fields from the fixture's own records. A definition whose sources find
no fixture file fails the sweep (``fixture_for``), so a new definition brings its fixture or is refused.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collector.definitions import AgentDefinition
from collector.paths import Paths
from collector.sources.otlp_files import SPOOL_FOLDER
from collector.sources.spool_writer import SpoolWriter

FIXTURES = Path(__file__).parent.parent / "fixtures"
_RAW = "\u0000sweep-raw\u0000"  # a placeholder string replaced by raw JSON text after encoding
# fields a parser reads for ids, times, tokens, tool ids and kinds: drawn more often than the rest
_INTERESTING = re.compile(r"(id|uuid|session|time|stamp|ts|token|usage|input|output|cache|call|tool|type|"
                          r"model|name|payload|message|role|parts|cwd|event|status|kind|content|value)", re.I)
LINE_KINDS = ("spool", "jsonl", "otlp", "otlp_file")  # one JSON value a line
OTEL_KINDS = ("otlp", "otlp_file")  # OTLP/JSON lines: fields deep inside (attribute values, ids, times)
OTEL_DEPTH = 12  # payload.export.resourceLogs[i].scopeLogs[j].logRecords[k].attributes[n].value.stringValue


@dataclass(frozen=True)
class Value:
    """One replacement: ``json`` for JSON text (``raw``: the JSON text itself, which may not be JSON),
    ``sql`` for a SQLite column."""

    name: str
    json: Any = None
    raw: bytes | None = None
    sql: Any = None


def _deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


VALUES = (
    Value("null", None, sql=None),
    Value("bool", True, sql=1),
    Value("int past int64", 2**64, sql=1.8446744073709552e19),
    Value("negative", -5, sql=-5),
    Value("float", 1.5, sql=1.5),
    Value("NaN text", raw=b"NaN", sql="NaN"),
    Value("inf text", raw=b"Infinity", sql="Infinity"),
    Value("string", "sweep", sql="sweep"),
    Value("empty string", "", sql=""),
    Value("non-UTF-8 bytes", raw=b'"\xff\xfe sweep"', sql=b"\xff\xfe"),
    Value("list", [1, "a"], sql="[1, \"a\"]"),
    Value("object", {"sweep": 1}, sql="{\"sweep\": 1}"),
    Value("10 MB", "x" * 10_000_000, sql="x" * 10_000_000),
    Value("1000 deep", raw=_deep(1000), sql=_deep(1000).decode()),
)


@dataclass(frozen=True)
class Target:
    """One place a source reads: a line of a file (``line``), a whole JSON document (``line`` None), or a
    SQLite row (``table``, ``rowid``) and, inside it, a column and a JSON path in that column's text."""

    source: str  # the definition's source name
    kind: str  # spool | jsonl | otlp | otlp_file | json_file | sqlite
    file: Path  # relative to the case's root (home/ or spool/ parent)
    line: int | None = None
    path: tuple[str | int, ...] = ()
    table: str | None = None
    rowid: int | None = None
    column: str | None = None

    def describe(self) -> str:
        where = f"{self.file}"
        if self.line is not None:
            where += f" line {self.line + 1}"
        if self.table is not None:
            where += f" {self.table} rowid {self.rowid} column {self.column}"
        return f"{self.source} ({self.kind}) {where} {'.'.join(map(str, self.path)) or '(whole value)'}"


@dataclass
class Case:
    target: Target
    value: Value
    original: Any = None  # the value it replaces (JSON text: the decoded value; SQLite: the column's)

    @property
    def wrong_type(self) -> bool:
        """The replacement has another type than the original (null aside: JSON writers mean "absent")."""
        if self.value.name == "null":
            return False
        new = self.value.json if self.target.kind != "sqlite" or self.target.path else self.value.sql
        return self.value.raw is not None or _kind(new) != _kind(self.original)

    def describe(self) -> str:
        return f"{self.target.describe()} := {self.value.name}"


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, (int, float)) else type(value).__name__


def fixture_cases(agent: str) -> list[Path]:
    """The agent's fixture cases (tool_then_answer first), then those of its telemetry (``<agent>-telemetry``:
    the OTLP receiver's spool beside the home of the same run)."""
    cases: list[Path] = []
    for root in (FIXTURES / agent, FIXTURES / f"{agent}-telemetry"):
        cases += sorted((p for p in root.iterdir() if (p / "home").is_dir() or (p / "spool").is_dir()),
                        key=lambda p: (p.name != "tool_then_answer", p.name)) if root.is_dir() else []
    return cases


def source_files(defn: AgentDefinition, source: dict[str, Any], paths: Paths) -> list[Path]:
    kind = source["kind"]
    if kind == "spool":
        folder = paths.spool_dir / defn.id
        return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if kind == "otlp":  # what the receiver spooled: <spool>/otlp/<agent>/*.jsonl (collector.sources.otlp_files)
        folder = paths.spool_dir / SPOOL_FOLDER / defn.id
        return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if kind in ("jsonl", "json_file", "otlp_file"):
        found: list[Path] = []
        for pattern in source.get("globs", []):
            expanded = paths.expand(pattern, env={})
            anchor = Path(expanded.anchor)
            found += sorted(p for p in anchor.glob(str(expanded.relative_to(anchor))) if p.is_file())
        return found
    if kind == "sqlite":
        db = paths.expand(source["path"], env={})
        return [db] if db.is_file() else []
    return []


def fixture_for(defn: AgentDefinition, source: dict[str, Any]) -> Path | None:
    """The first fixture case of the agent whose home (or spool) has a file for ``source``."""
    for case in fixture_cases(defn.id):
        if source_files(defn, source, case_paths(case)):
            return case
    return None


def built_otlp_case(defn: AgentDefinition, source: dict[str, Any], into: Path) -> Path | None:
    """For an ``otlp`` source with no recorded spool: a case whose spool holds one line as the receiver
    writes it (``SpoolWriter.line``, as ``collector.ingest.otlp_route`` does) of a small OTLP/JSON logs
    request (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding: hex ids, 64-bit integers as
    strings, typed attribute values) from the definition's first ``service_names`` value; None for others."""
    services = source.get("service_names") or []
    if source["kind"] != "otlp" or not services:
        return None
    def attrs(**values: Any) -> list[dict[str, Any]]:
        return [{"key": k.replace("_", "."), "value": v} for k, v in values.items()]
    records = [{"timeUnixNano": str(1_796_000_000_000_000_000 + n), "observedTimeUnixNano": "1796000000500000000",
                "severityNumber": 9, "body": {"stringValue": f"sweep event {n}"},
                "traceId": "5b8efff798038103d269b633813fc60c", "spanId": f"eee19b7ec3c1b17{n}",
                "attributes": attrs(event_name={"stringValue": "sweep.event"}, session_id={"stringValue": "sweep-1"},
                                    input_tokens={"intValue": str(10 + n)}, duration_ms={"doubleValue": 1.5})}
               for n in range(2)]
    export = {"resourceLogs": [{"resource": {"attributes": attrs(service_name={"stringValue": services[0]})},
                                "scopeLogs": [{"scope": {"name": "sweep", "version": "1"}, "logRecords": records}]}]}
    line = SpoolWriter.line(defn.id, "logs", {"digest": "0" * 32, "export": export}, 1_796_000_001.0)
    folder = into / "spool" / SPOOL_FOLDER / defn.id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{defn.id}-built.http.jsonl").write_bytes(line)
    (into / "home").mkdir(exist_ok=True)
    return into


def _paths_in(value: Any, prefix: tuple[str | int, ...] = (), depth: int = 3,
              every: bool = False) -> Iterator[tuple[str | int, ...]]:
    """The fields of ``value`` down to ``depth``: of a list its first element (``every``: each one)."""
    if depth == 0:
        return
    if isinstance(value, dict):
        for key, child in value.items():
            yield (*prefix, key)
            yield from _paths_in(child, (*prefix, key), depth - 1, every)
    elif isinstance(value, list) and value:
        for n, child in enumerate(value if every else value[:1]):
            yield (*prefix, n)
            yield from _paths_in(child, (*prefix, n), depth - 1, every)


def targets(defn: AgentDefinition, source: dict[str, Any], paths: Paths, root: Path) -> list[Target]:
    """Every (record, field) the source reads in the prepared case under ``root``."""
    out: list[Target] = []
    kind = source["kind"]
    for file in source_files(defn, source, paths):
        rel = file.relative_to(root)
        if kind in LINE_KINDS:
            deep = {"depth": OTEL_DEPTH, "every": True} if kind in OTEL_KINDS else {}
            for n, line in enumerate(file.read_bytes().splitlines()):
                try:
                    data = json.loads(line)
                except ValueError:
                    continue
                out += [Target(source["name"], kind, rel, n, p) for p in _paths_in(data, **deep)]
        elif kind == "json_file":
            data = json.loads(file.read_bytes())
            out += [Target(source["name"], kind, rel, None, p) for p in _paths_in(data, depth=4)]
        elif kind == "sqlite":
            out += _sqlite_targets(source, file, rel)
    return out


def _sqlite_targets(source: dict[str, Any], db: Path, rel: Path) -> list[Target]:
    out: list[Target] = []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        for spec in source.get("tables", []):
            table = spec["table"]
            columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            for rowid, *values in conn.execute(f'SELECT rowid, * FROM "{table}"'):
                for column, value in zip(columns, values, strict=True):
                    out.append(Target(source["name"], "sqlite", rel, table=table, rowid=rowid, column=column))
                    if isinstance(value, str) and value.startswith(("{", "[")):
                        try:
                            inner = json.loads(value)
                        except ValueError:
                            continue
                        out += [Target(source["name"], "sqlite", rel, path=p, table=table, rowid=rowid,
                                       column=column) for p in _paths_in(inner)]
    finally:
        conn.close()
    return out


def sample(all_targets: list[Target], count: int, seed: int) -> list[Case]:
    """``count`` cases: the sources in turn, each value in turn, a target drawn at random (fields that look
    like ids, times, tokens or kinds three times as often), with a fixed seed."""
    rng = random.Random(seed)
    offset = rng.randrange(len(VALUES))
    by_source: dict[str, list[Target]] = {}
    for target in all_targets:
        by_source.setdefault(target.source, []).append(target)
    names = sorted(by_source)
    cases: list[Case] = []
    for n in range(count):
        pool = by_source[names[n % len(names)]]
        weights = [3 if t.path and _INTERESTING.search(str(t.path[-1])) or t.column and
                   _INTERESTING.search(t.column) else 1 for t in pool]
        target = rng.choices(pool, weights)[0]
        cases.append(Case(target, VALUES[(n // len(names) + offset) % len(VALUES)]))
    return cases


def every_case(all_targets: list[Target]) -> list[Case]:
    return [Case(t, v) for t in all_targets for v in VALUES]


# -- applying one case to a prepared copy ------------------------------------------------------------


def _set(data: Any, path: tuple[str | int, ...], value: Any) -> Any:
    if not path:
        return value
    node = data
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return data


def _get(data: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        data = data[step]
    return data


def _encode(data: Any, path: tuple[str | int, ...], value: Value) -> bytes:
    placed = _set(data, path, _RAW if value.raw is not None else value.json)
    text = json.dumps(placed, ensure_ascii=False).encode()
    if value.raw is not None:
        text = text.replace(json.dumps(_RAW).encode(), value.raw, 1)
    return text


def apply(case: Case, root: Path) -> None:
    t = case.target
    file = root / t.file
    if t.kind in LINE_KINDS:
        lines = file.read_bytes().splitlines()
        assert t.line is not None
        case.original = _get(json.loads(lines[t.line]), t.path)
        lines[t.line] = _encode(json.loads(lines[t.line]), t.path, case.value)
        file.write_bytes(b"\n".join(lines) + b"\n")
    elif t.kind == "json_file":
        case.original = _get(json.loads(file.read_bytes()), t.path)
        file.write_bytes(_encode(json.loads(file.read_bytes()), t.path, case.value))
    elif t.kind == "sqlite":
        conn = sqlite3.connect(file)
        try:
            (current,) = conn.execute(f'SELECT "{t.column}" FROM "{t.table}" WHERE rowid = ?', (t.rowid,)).fetchone()
            case.original = _get(json.loads(current), t.path) if t.path else current
            if t.path:  # the column's JSON text with the field replaced, as TEXT (its bytes as they are)
                new = _encode(json.loads(current), t.path, case.value)
                conn.execute(f'UPDATE "{t.table}" SET "{t.column}" = CAST(? AS TEXT) WHERE rowid = ?',
                             (new, t.rowid))
            else:
                conn.execute(f'UPDATE "{t.table}" SET "{t.column}" = ? WHERE rowid = ?', (case.value.sql, t.rowid))
            conn.commit()
        finally:
            conn.close()


def remove(target: Target, root: Path) -> None:
    """The record itself taken away (the neighbours' baseline): for line kinds the whole line (an OTLP/JSON
    line's records are not taken one by one: their ids are made of the request digest and the record's index
    in it, which taking one away would shift, so that another call would seem to be the same)."""
    file = root / target.file
    if target.kind in LINE_KINDS:
        lines = file.read_bytes().splitlines()
        del lines[target.line]  # type: ignore[arg-type]
        file.write_bytes(b"".join(line + b"\n" for line in lines))
    elif target.kind == "json_file":
        file.unlink()
    elif target.kind == "sqlite":
        conn = sqlite3.connect(file)
        try:
            conn.execute(f'DELETE FROM "{target.table}" WHERE rowid = ?', (target.rowid,))
            conn.commit()
        finally:
            conn.close()


def case_paths(root: Path) -> Paths:
    """The collector's paths for a case folder: home/ is HOME, the folder itself the data dir (its spool/)."""
    return Paths(home=root / "home", config_dir=root / "config", data_dir=root)


def prepare(case_dir: Path, into: Path) -> Path:
    """A fresh copy of the fixture case (home/ and spool/) under ``into``; returns its root."""
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    for part in ("home", "spool"):
        if (case_dir / part).exists():
            shutil.copytree(case_dir / part, into / part, symlinks=True)
    (into / "home").mkdir(exist_ok=True)
    return into
