"""A record the process died on is quarantined at the next start instead of killing it again.

Exceptions are the quarantine's business (``collector.pipeline.quarantine``); this module covers the deaths
no ``except`` sees: a segfault or abort in a C extension, the kernel's OOM killer. While the pipeline works
on a record, ``<state dir>/processing`` names it (its stream and position): the file is mapped into memory
and written in place, one copy per record, no system call and no fsync (a process that dies keeps what it
wrote to a shared mapping: the page belongs to the kernel's cache; only a machine crash loses it, and that
is not a record's doing). When a batch is through, the name is cleared.

At start-up a name still there means the previous process died while working on that record:

* it died of a fatal signal (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL: ``faulthandler`` wrote
  ``<state dir>/fault.log``, enabled by the daemon's commands, ``CrashGuard(faults=True)``): the record is
  condemned at once; when it is read again it goes to the quarantine (stage ``crash``) unprocessed;
* it died without a word (SIGKILL: the OOM killer, or a user's or a service manager's ``kill -9``): the
  record becomes a suspect and is processed again; the third silent death on it (``SILENT_DEATHS``)
  condemns it. A ``kill -9`` that is not the record's doing can land on the same record twice (a kill during
  start-up, when the suspect is the first thing processed): two such kills never cost a record.

Exporting is covered too (``collector.daemon.delivery``): while an exporter takes a batch the name is the batch's
(the exporter and the first and last ``event.id``). A process that died there leaves that name; at the next
start the batch holding one of those ids is offered to that exporter one entry at a time, each entry named
before it goes. A death then names the entry, which counts the batch's death as its first: the batch goes
one entry at a time again at the next start, and the third silent death (a fatal signal: the first) makes
the entry condemned, quarantined for that exporter instead of offered again (``condemned_entry``); the
other exporters still get it.

A test can make the process die on a record: ``AGENT_COLLECTOR_TEST_DIE_ON=abort:<text>`` (``os.abort()``)
or ``kill:<text>`` (SIGKILL to itself) when the record's JSON contains ``<text>``; unset, nothing is looked at.
"""

from __future__ import annotations

import faulthandler
import hashlib
import logging
import mmap
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import orjson

from collector.model.raw import RawRecord
from collector.util.private import open_private

log = logging.getLogger(__name__)

MARKER = "processing"
FAULT_LOG = "fault.log"
SIZE = 4096
_SEP = b"\x1f"
_TEST_DIE_ON = "AGENT_COLLECTOR_TEST_DIE_ON"
_EXPORT = b"\x1eexport"  # a batch being exported (no stream id starts with a control character)
_ENTRY = b"\x1eentry"  # one entry being exported on its own
SILENT_DEATHS = 3  # deaths without a fatal signal's report on one record (or entry) that condemn it


def record_key(record: RawRecord) -> bytes:
    key = record.source_id.encode("utf-8", "replace") + _SEP + record.position.encode("utf-8", "replace")
    return _bounded(key)


def _bounded(key: bytes) -> bytes:
    return key if len(key) < SIZE - 16 else hashlib.sha256(key).hexdigest().encode()


def _eid(entry: Mapping[str, object]) -> bytes:
    return str(entry.get("event.id", "")).encode("utf-8", "replace")


def entry_key(exporter: str, entry: Mapping[str, object]) -> bytes:
    return _bounded(_ENTRY + _SEP + exporter.encode("utf-8", "replace") + _SEP + _eid(entry))


def batch_key(exporter: str, batch: Sequence[Mapping[str, object]]) -> bytes:
    ends = _eid(batch[0]) + _SEP + _eid(batch[-1]) if batch else b""
    return _EXPORT + _SEP + exporter.encode("utf-8", "replace") + _SEP + ends


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the previous process left behind."""

    key: bytes | None = None  # the record it died on, if it died on one
    strikes: int = 0  # deaths on that record before this one
    fatal_signal: bool = False  # faulthandler wrote a report
    fault_report: str = ""


class CrashGuard:
    """Names the record being processed (``enter``), clears the name between batches (``clear``), and
    says which records must not be processed again (``condemned``). ``faults``: also have ``faulthandler``
    report a fatal signal to ``<state dir>/fault.log`` (the daemon's commands; never in-process tests,
    where pytest has its own handler)."""

    def __init__(self, state_dir: Path, env: Mapping[str, str] | None = None, faults: bool = False) -> None:
        self.path = state_dir / MARKER
        self.verdict = read_verdict(state_dir)
        self._condemned: set[bytes] = set()
        self._suspects: dict[bytes, int] = {}
        self._careful: tuple[bytes, set[bytes]] | None = None  # (exporter, ids) of the batch it died exporting
        self._entry_strikes: dict[bytes, int] = {}  # an entry it died exporting alone -> deaths so far
        self._judge(self.verdict)
        fd = open_private(self.path, os.O_RDWR | os.O_CREAT)
        try:
            os.ftruncate(fd, SIZE)
            self._map = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self._map[:] = b"\0" * SIZE
        self._busy = False
        self._stream = ""  # the last record's source_id, and its bytes with the separator (enter)
        self._stream_key = _SEP
        self._faults = _record_faults(state_dir) if faults else None
        die_on = (env if env is not None else os.environ).get(_TEST_DIE_ON, "")
        self._die_how, _, text = die_on.partition(":")
        self._die_on = text.encode() if text else b""

    def _judge(self, verdict: Verdict) -> None:
        if verdict.key is None:
            if verdict.fatal_signal:
                log.error("the previous run died of a fatal signal (not while processing a record):\n%s",
                          verdict.fault_report[-4000:])
            return
        if verdict.key.startswith(_EXPORT + _SEP):
            self._careful_after(verdict.key, verdict)
            return
        deaths = verdict.strikes + 1
        if verdict.key.startswith(_ENTRY + _SEP) and not verdict.fatal_signal and deaths < SILENT_DEATHS:
            _, exporter, eid = verdict.key.split(_SEP, 2)
            self._careful = (exporter, {eid})
            self._entry_strikes[verdict.key] = deaths
            log.error("the previous run was killed while exporter %s took one entry (%d deaths on it); its batch "
                      "goes to it one entry at a time again", exporter.decode("utf-8", "replace"), deaths)
            return
        where = verdict.key.decode("utf-8", "replace").replace("\x1f", " at ")
        if verdict.fatal_signal or deaths >= SILENT_DEATHS:
            self._condemned.add(verdict.key)
            log.error("the previous run died while processing the record %s (%s); it is quarantined when read "
                      "again", where, "a fatal signal" if verdict.fatal_signal else f"{deaths} deaths")
            if verdict.fault_report:
                log.error("the fatal signal's report:\n%s", verdict.fault_report[-4000:])
        else:
            self._suspects[verdict.key] = deaths
            log.warning("the previous run was killed while processing the record %s (%d deaths on it); it is "
                        "processed again (the %dth quarantines it)", where, deaths, SILENT_DEATHS)

    def _careful_after(self, key: bytes, verdict: Verdict) -> None:
        _, exporter, *ids = key.split(_SEP)
        self._careful = (exporter, {i for i in ids if i})
        log.error("the previous run died while exporter %s took a batch (%s); that batch goes to it one entry "
                  "at a time", exporter.decode("utf-8", "replace"),
                  "a fatal signal" if verdict.fatal_signal else "killed")
        if verdict.fault_report:
            log.error("the fatal signal's report:\n%s", verdict.fault_report[-4000:])

    def condemned(self, record: RawRecord) -> bool:
        if not self._condemned:
            return False
        key = record_key(record)
        if key in self._condemned:
            self._condemned.discard(key)  # quarantined now; a retry of it is processed (and judged) again
            return True
        return False

    def has_condemned(self) -> bool:
        return bool(self._condemned)

    def condemned_entry(self, exporter: str, entry: Mapping[str, object]) -> bool:
        """The previous runs died on ``entry`` exporting it to ``exporter`` (a fatal signal, or
        ``SILENT_DEATHS`` kills): quarantine it, do not offer it."""
        if not self._condemned:
            return False
        key = entry_key(exporter, entry)
        if key in self._condemned:
            self._condemned.discard(key)
            return True
        return False

    def exporting(self, exporter: str, batch: Sequence[Mapping[str, object]]) -> bool:
        """``exporter`` takes ``batch`` now (named until :meth:`clear`); True: the previous run died while
        it took this batch, so it goes one entry at a time (:meth:`exporting_entry` before each)."""
        careful = self._careful
        if careful is not None and careful[0] == exporter.encode("utf-8", "replace") and \
                any(_eid(e) in careful[1] for e in batch):
            self._careful = None
            return True
        self._write(0, _bounded(batch_key(exporter, batch)))
        return False

    def exporting_entry(self, exporter: str, entry: Mapping[str, object]) -> None:
        """``exporter`` takes ``entry`` alone; dying now is one more death on it (the batch's was its first)."""
        key = entry_key(exporter, entry)
        self._write(self._entry_strikes.get(key, 1) if self._entry_strikes else 1, key)

    def _write(self, strikes: int, key: bytes) -> None:
        data = b"%d\x1f%d\x1f" % (strikes, len(key)) + key
        self._map[: len(data)] = data
        self._busy = True

    def enter(self, record: RawRecord) -> bytes:
        """Name ``record`` (and return the name, for :meth:`enter_again`)."""
        # record_key and _write inlined (twice per record): the stream's bytes are kept while it is the same
        if record.source_id != self._stream:
            self._stream = record.source_id
            self._stream_key = record.source_id.encode("utf-8", "replace") + _SEP
        key = self._stream_key + record.position.encode("utf-8", "replace")
        if len(key) >= SIZE - 16:
            key = _bounded(key)
        data = b"%d\x1f%d\x1f" % (self._suspects.get(key, 0) if self._suspects else 0, len(key)) + key
        self._map[: len(data)] = data
        self._busy = True
        if self._die_on:
            self._maybe_die(record)
        return data

    def enter_again(self, data: bytes, record: RawRecord) -> None:
        """Name ``record`` again, by what :meth:`enter` returned for it (a later stage of the same batch)."""
        self._map[: len(data)] = data
        self._busy = True
        if self._die_on:
            self._maybe_die(record)

    def clear(self) -> None:
        if self._busy:
            self._map[:1] = b"\0"
            self._busy = False

    def close(self) -> None:
        self._map.close()
        if self._faults is not None:
            faulthandler.disable()
            self._faults.close()
            self._faults = None

    def _maybe_die(self, record: RawRecord) -> None:
        if self._die_on in orjson.dumps(record.data):
            if self._die_how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os.abort()


def read_verdict(state_dir: Path) -> Verdict:
    """The record the previous process died on (if any), and whether a fatal signal was reported."""
    try:
        report = (state_dir / FAULT_LOG).read_text(errors="replace")
    except OSError:
        report = ""
    fatal = bool(report.strip())
    try:
        raw = (state_dir / MARKER).read_bytes()[:SIZE]
    except OSError:
        return Verdict(fatal_signal=fatal, fault_report=report)
    strikes, _, rest = raw.partition(_SEP)
    length, _, key = rest.partition(_SEP)
    if not strikes.isdigit() or not length.isdigit() or not 0 < int(length) <= len(key):
        return Verdict(fatal_signal=fatal, fault_report=report)
    return Verdict(key[: int(length)], int(strikes), fatal, report)


def _record_faults(state_dir: Path) -> IO[str] | None:
    """A fatal signal writes its report to ``<state dir>/fault.log`` (emptied now: read_verdict read it)."""
    try:
        fd = open_private(state_dir / FAULT_LOG, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    except OSError as exc:
        log.warning("cannot record fatal signals in %s: %s", state_dir / FAULT_LOG, exc)
        return None
    out = os.fdopen(fd, "w")
    faulthandler.enable(out)
    return out
