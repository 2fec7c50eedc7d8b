"""The dead-letter file: records that failed after they were read, kept with where they came from and why.

A record that fails anywhere in the pipeline (parse, boundary, correlate, status, policy, mask, encode) is
written here and left out of its batch; the batch goes on, its positions are committed, so a record that
failed once is never processed again by itself. ``<data dir>/quarantine/quarantine.jsonl`` holds one JSON
line per record: an ``id``, the time, agent, kind, source (stream, path, position), the stage and the
reason. The record's data is kept only when content capture is on for its agent, and then masked; without
it, ``retry`` reads the record again from its source (a JSONL line at its offset, a whole JSON document).

An entry an exporter failed on (stage ``export``, ``collector.daemon.delivery``) is kept with the record it came
from (its source position), the exporter's name and the exception; the line also holds the entry as the
exporters got it (``entry``: content policy and masking already applied, so without capture it holds no
content), because a retry offers that entry again to that exporter alone (the others took it).

The file is bounded: past ``MAX_BYTES`` it moves to ``quarantine.jsonl.1`` (the older one is dropped).
``retry`` moves lines to ``retry.jsonl``; the next collection cycle feeds them through the pipeline again,
or their entries to their exporter (a record or entry that fails again comes back here with ``attempts``
+ 1).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from collector.model.boundary import Refused, shape, within_int64
from collector.model.raw import RawRecord
from collector.paths import Paths
from collector.pipeline.masking import mask_value

log = logging.getLogger(__name__)

MAX_BYTES = 8 * 1024 * 1024
FILE = "quarantine.jsonl"
RETRY = "retry.jsonl"
ATTEMPTS = "quarantine.attempts"  # RawRecord.meta key of a retried record: how often it failed before


@dataclass(frozen=True, slots=True)
class DueEntry:
    """An entry to offer again to the exporter that failed on it; ``origin``: where it came from."""

    exporter: str
    entry: dict[str, Any]
    origin: RawRecord
    line: dict[str, Any]  # the quarantine line, to put back if the exporter is gone


@dataclass(slots=True)
class Due:
    """What a ``retry`` asked for: records for the pipeline, entries for the exporter that failed on them."""

    records: list[RawRecord] = field(default_factory=list)
    entries: list[DueEntry] = field(default_factory=list)


def quarantine_dir(paths: Paths) -> Path:
    return paths.data_dir / "quarantine"


def describe(exc: BaseException) -> str:
    """A reason that names the error, never the data (exception texts can quote values)."""
    if isinstance(exc, Refused):
        return str(exc)
    return type(exc).__name__


class Quarantine:
    """Writes failed records to the dead-letter file and counts them per source and reason. Thread-safe:
    the pipeline's worker and the exporters' delivery threads (OTLP poison) share one."""

    def __init__(self, directory: Path | None, mask: Callable[[Any], Any] = mask_value) -> None:
        self.directory = directory
        self.mask = mask  # the collector's masker (its configured rules), for the data kept with capture on
        self.counts: Counter[tuple[str, str]] = Counter()  # (source, "stage: reason") -> records
        self.added = 0
        self._retried: dict[tuple[str, str], int] = {}  # (exporter, event id) -> attempts, of entries due again
        self._lock = threading.Lock()
        if directory is not None:
            for line in read_lines(directory / FILE):
                self.counts[(_source(line), _why(line))] += 1

    def add(self, record: RawRecord, stage: str, reason: str, keep_data: bool,
            extra: dict[str, Any] | None = None) -> None:
        self.added += 1
        try:
            line = _line(record, stage, reason, keep_data, self.mask)
        except Exception as exc:  # noqa: BLE001 - the last resort must not fail: keep where and why only
            line = _line(record, stage, reason, False, self.mask)
            line["data_omitted"] = f"cannot be kept ({type(exc).__name__})"
        line.update(extra or {})
        log.warning("%s %s record at %s:%s quarantined at %s: %s", record.agent, record.kind, line["path"],
                    record.position, stage, reason)
        with self._lock:
            self.counts[(_source(line), _why(line))] += 1
            if self.directory is None:
                return
            try:
                self._append(_encode(line))
            except OSError as exc:
                log.error("cannot write the quarantine file in %s: %r", self.directory, exc)

    def add_entry(self, entry: dict[str, Any], origin: RawRecord | None, exporter: str, reason: str) -> None:
        """``exporter`` failed on ``entry`` (made from ``origin``, if a record made it): quarantined for it."""
        eid = str(entry.get("event.id", ""))
        record = origin if isinstance(origin, RawRecord) else RawRecord(
            str(entry.get("gen_ai.agent.type") or "unknown"), "entry", {}, f"export:{exporter}", eid, time.time_ns())
        attempts = self._retried.pop((exporter, eid), 0)
        ident = hashlib.sha256(f"{record.source_id}\x1f{record.position}\x1fexport\x1f{exporter}\x1f{eid}".encode())
        self.add(record, "export", reason, False, {"id": ident.hexdigest()[:16], "exporter": exporter,
                                                   "event.id": eid, "attempts": attempts + 1, "entry": entry})

    def _append(self, data: bytes) -> None:
        assert self.directory is not None
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.directory / FILE
        try:
            if path.stat().st_size + len(data) > MAX_BYTES:
                os.replace(path, path.with_name(FILE + ".1"))
        except FileNotFoundError:
            pass
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def stats(self) -> dict[str, Any]:
        by_source: dict[str, dict[str, int]] = {}
        with self._lock:
            counts = sorted(self.counts.items())
        for (source, why), count in counts:
            by_source.setdefault(source, {})[why] = count
        return {"records": sum(self.counts.values()), "by_source": by_source}

    def due(self) -> Due:
        """What a ``retry`` asked for; the request is consumed. Records' meta counts their attempts."""
        due = Due()
        if self.directory is None:
            return due
        path = self.directory / RETRY
        try:
            taken = path.with_name(RETRY + ".taking")
            os.replace(path, taken)
        except FileNotFoundError:
            return due
        for line in read_lines(taken):
            if line.get("stage") == "export":
                self._due_entry(line, due)
                continue
            record = recover(line)
            if record is None:
                log.warning("quarantined record %s cannot be read again from %s; dropped", line.get("id"),
                            line.get("path"))
                continue
            due.records.append(record)
        taken.unlink()
        return due

    def _due_entry(self, line: dict[str, Any], due: Due) -> None:
        entry, exporter = line.get("entry"), line.get("exporter")
        if not isinstance(entry, dict) or not isinstance(exporter, str):
            log.warning("quarantined entry %s was not kept (%s); it cannot be offered again, dropped",
                        line.get("id"), line.get("data_omitted", "no entry in the line"))
            return
        self._retried[(exporter, str(entry.get("event.id", "")))] = int(line.get("attempts", 1))
        origin = RawRecord(str(line.get("agent")), str(line.get("kind")), {}, str(line.get("stream", "")),
                           str(line.get("position", "")), int(line.get("observed_ns") or 0),
                           {k: v for k, v in (line.get("meta") or {}).items() if isinstance(v, str)})
        due.entries.append(DueEntry(exporter, entry, origin, line))

    def keep(self, line: dict[str, Any]) -> None:
        """Put a line back as it was (an entry whose exporter is not configured any more)."""
        if self.directory is not None:
            with self._lock:
                try:
                    self._append(_encode(line))
                except OSError as exc:
                    log.error("cannot write the quarantine file in %s: %r", self.directory, exc)


def _line(record: RawRecord, stage: str, reason: str, keep_data: bool,
          mask: Callable[[Any], Any] = mask_value) -> dict[str, Any]:
    path = str(record.meta.get("path", ""))
    ident = hashlib.sha256(f"{record.source_id}\x1f{record.position}\x1f{stage}".encode()).hexdigest()[:16]
    line: dict[str, Any] = {
        "id": ident, "at": time.time_ns(), "agent": record.agent, "kind": record.kind,
        "stream": record.source_id, "path": path, "position": record.position,
        "observed_ns": record.observed_ns,
        "meta": {k: v for k, v in record.meta.items() if isinstance(v, str) and k != ATTEMPTS},
        "stage": stage, "reason": reason, "attempts": int(record.meta.get(ATTEMPTS, "0")) + 1,
    }
    if keep_data:
        if shape(record.data) is None:
            line["data"] = within_int64(mask(record.data))
        else:
            line["data_omitted"] = "too deep or too large to keep"
    return line


def _encode(line: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(line) + b"\n"
    except (TypeError, orjson.JSONEncodeError):  # the kept data after all: keep the rest
        line.pop("data", None)
        line.pop("entry", None)
        line["data_omitted"] = "not encodable"
        return orjson.dumps(line) + b"\n"


def _source(line: dict[str, Any]) -> str:
    return f"{line.get('agent')}:{line.get('kind')}"


def _why(line: dict[str, Any]) -> str:
    return f"{line.get('stage')}: {line.get('reason')}"


def read_lines(path: Path) -> list[dict[str, Any]]:
    try:
        raw = path.read_bytes()
    except OSError:
        return []
    out = []
    for chunk in raw.splitlines():
        try:
            value = orjson.loads(chunk)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def listing(directory: Path) -> list[dict[str, Any]]:
    """Every quarantined record, oldest first (the rotated file, then the current one)."""
    return read_lines(directory / (FILE + ".1")) + read_lines(directory / FILE)


def request_retry(directory: Path, ids: Iterable[str] | None) -> int:
    """Move the lines with ``ids`` (all when None) from the quarantine to the retry request."""
    wanted = None if ids is None else set(ids)
    moved: list[dict[str, Any]] = []
    for name in (FILE + ".1", FILE):
        path = directory / name
        lines = read_lines(path)
        if not lines:
            continue
        keep = [x for x in lines if wanted is not None and x.get("id") not in wanted]
        moved.extend(x for x in lines if wanted is None or x.get("id") in wanted)
        _rewrite(path, keep)
    if moved:
        with (directory / RETRY).open("ab") as f:
            f.write(b"".join(orjson.dumps(x) + b"\n" for x in moved))
    return len(moved)


def _rewrite(path: Path, lines: list[dict[str, Any]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    os.replace(tmp, path)


def recover(line: dict[str, Any]) -> RawRecord | None:
    """The quarantined record again: from the kept data, else read anew from its source."""
    data = line.get("data")
    if not isinstance(data, dict):
        data = _reread(line)
    if data is None:
        return None
    meta = dict(line.get("meta") or {})
    meta[ATTEMPTS] = str(line.get("attempts", 1))
    return RawRecord(str(line["agent"]), str(line["kind"]), data, str(line.get("stream", "")),
                     str(line.get("position", "")), int(line.get("observed_ns") or time.time_ns()), meta)


def _reread(line: dict[str, Any]) -> dict[str, Any] | None:
    from collector.model.decode import loads_object
    from collector.util.regular import read_line_at, read_regular

    path = line.get("path")
    if not path:
        return None
    if line.get("kind") == "json_file":
        content = read_regular(path)
        if content is None or hashlib.sha256(content).hexdigest() != line.get("position"):
            return None
        return loads_object(content)
    if line.get("kind") in ("hook", "transcript") and str(line.get("position", "")).isdigit():
        raw = read_line_at(path, int(line["position"]))
        return None if raw is None else loads_object(raw)
    return None
