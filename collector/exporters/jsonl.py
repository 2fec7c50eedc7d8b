"""The embedded default exporter: one entry per line in daily files ``activity-YYYY-MM-DD.jsonl``.

Exactly once across restarts and ``kill -9``: every batch is written with one ``write`` and fsynced
before ``export`` returns; a write that fails (a full disk) is cut off again, so a refused batch leaves
nothing behind; the file and size at the last checkpoint commit are kept in the checkpoint
store (``mark()``); on start, whatever was written after that mark (a batch whose checkpoint never
committed) is read back, a torn last line is cut off, and those ids are not written again.

Those read-back ids are *orphans* until their batch is offered again and committed: another source's
batch may commit first and move the mark past them, and a second ``kill -9`` then would forget them
(the replayed batch was written twice). So while an orphan (read back, not yet in the checkpoint store's
delivered ids, not yet offered again) remains, the mark keeps the place where reading back must start
(``scan``). Orphans that are never offered again are let go: :data:`RECENT_IDS` entries later in one
run, or once the scan would start more than :data:`SCAN_LIMIT` bytes back (restarts do not grow it).
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from collector.exporters.base import Entry, ExportError
from collector.model.entry import delivery_id
from collector.model.pilot_names import to_pilot
from collector.util.private import open_private, opener, private_dir

log = logging.getLogger(__name__)

PREFIX = "activity-"
RECENT_IDS = 100_000
SCAN_LIMIT = 64 * 1024 * 1024  # bytes of output read back at most, whatever the restarts


class JsonlExporter:
    name = "jsonl"

    def __init__(self, directory: Path, mark: dict[str, Any] | None = None,
                 delivered: Callable[[Iterable[str]], set[str]] | None = None, field_names: str = "ours") -> None:
        """``mark``: what :meth:`mark` returned at the last checkpoint commit; ``delivered``: the subset of
        the given ids the checkpoint store holds as delivered (without it, every id read back is an orphan);
        ``field_names`` ``"pilot"``: each line uses LoongSuite Pilot's names where they differ from ours
        (``collector.model.pilot_names.to_pilot``; ``event.id`` is the same in both)."""
        self.directory = directory
        self._rename = to_pilot if field_names == "pilot" else None
        private_dir(directory)
        self._recent: set[str] = set()  # with _order, their first-written order (a set and a queue: an
        self._order: deque[str] = deque()  # OrderedDict of 100,000 ids held 15 MB, these 4 MB)
        self._fd: int | None = None
        self._day: str | None = None
        self._torn: tuple[Path, int] | None = None  # (file, size) to cut back to before the next write
        self._orphans: set[str] = set()
        self._scan: dict[str, Any] | None = None  # where reading back starts while orphans remain
        self._since_recovery = 0
        self.written = 0
        self.skipped_duplicates = 0
        self._recover(mark or {}, delivered)

    # -- recovery ---------------------------------------------------------------------------------

    def _recover(self, mark: dict[str, Any], delivered: Callable[[Iterable[str]], set[str]] | None) -> None:
        start_at = mark["scan"] if isinstance(mark.get("scan"), dict) else mark
        files = sorted(self.directory.glob(f"{PREFIX}*.jsonl"))
        marked_file = start_at.get("file")
        found: list[str] = []
        for path in files:
            if marked_file and path.name < marked_file:
                continue
            if path.is_symlink() or not path.is_file():
                log.warning("%s is not a regular file of ours; left alone", path)
                continue
            start = int(start_at.get("size", 0)) if path.name == marked_file else 0
            found += self._scan_tail(path, start)
        self._orphans = set(found) - (delivered(found) if delivered and found else set())
        if self._orphans:
            self._scan = {"file": marked_file, "size": int(start_at.get("size", 0))} if marked_file else {}
            log.info("%d entries in the output after the last checkpoint; not written again", len(self._orphans))

    def _scan_tail(self, path: Path, start: int) -> list[str]:
        found = []
        with open(path, "rb+", opener=opener) as f:
            f.seek(start)
            data = f.read()
            end = data.rfind(b"\n") + 1
            if end < len(data):  # torn write from a crash: drop the partial line
                f.truncate(start + end)
                os.fsync(f.fileno())
            for line in data[:end].splitlines():
                try:
                    eid = delivery_id(orjson.loads(line))
                except orjson.JSONDecodeError:
                    continue
                if eid is None:
                    continue
                self._remember(eid)
                found.append(eid)
        return found

    # -- export -----------------------------------------------------------------------------------

    def export(self, batch: Sequence[Entry]) -> None:
        self.export_lines(batch, None)

    def export_lines(self, batch: Sequence[Entry], encoded: Sequence[bytes] | None) -> None:
        """``export``, with each entry's JSON given (``orjson.dumps(entry)``, the pipeline's encode check)."""
        lines = []
        recent = self._recent
        for n, entry in enumerate(batch):
            eid = str(delivery_id(entry))
            if eid in recent:
                self.skipped_duplicates += 1
                self._orphans.discard(eid)  # offered again: committed with this batch
                continue
            lines.append(self._line(entry, None if encoded is None else encoded[n]))
        if not lines:
            return
        data = b"\n".join(lines) + b"\n"
        try:
            if self._torn is not None:  # the tail of a refused batch is still there: cut it first
                os.truncate(*self._torn)
                self._torn = None
            fd = self._file()
            before = os.fstat(fd).st_size
        except OSError as exc:
            raise ExportError(f"cannot open {self.directory}: {exc.strerror}") from exc
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        except OSError as exc:
            self._cut(fd, before)  # a refused batch leaves nothing behind: offered again, it is written whole
            raise ExportError(f"cannot write {self.directory}: {exc.strerror}") from exc
        for entry in batch:
            self._remember(str(delivery_id(entry)))
        self.written += len(lines)
        self._since_recovery += len(lines)

    def _line(self, entry: Entry, encoded: bytes | None) -> bytes:
        if self._rename is not None:
            renamed = self._rename(entry)
            if renamed is not entry:
                return orjson.dumps(renamed)
        return orjson.dumps(entry) if encoded is None else encoded

    def _cut(self, fd: int, size: int) -> None:
        """Truncate back to ``size`` (freeing space needs no space); if even that fails, before the next write."""
        try:
            os.ftruncate(fd, size)
        except OSError:
            self._torn = (self.directory / f"{PREFIX}{self._day}.jsonl", size)

    def _file(self) -> int:
        day = time.strftime("%Y-%m-%d", time.gmtime())
        if self._fd is None or day != self._day:
            if self._fd is not None:
                os.close(self._fd)
            path = self.directory / f"{PREFIX}{day}.jsonl"
            try:
                self._fd = open_private(path)  # a symlink planted as tomorrow's file is refused
            except OSError as exc:
                self._fd = None
                raise ExportError(f"cannot open {path}: {exc.strerror or exc}"
                                  + (" (a symlink: refused)" if path.is_symlink() else "")) from exc
            self._day = day
        return self._fd

    def mark(self) -> dict[str, Any]:
        """Where the output stands now; stored with the checkpoint that covers it."""
        here: dict[str, Any] = {}
        if self._fd is not None and self._day is not None:
            here = {"file": f"{PREFIX}{self._day}.jsonl", "size": os.fstat(self._fd).st_size}
        too_far = bool(here and self._scan is not None and self._scan.get("file") in (None, here["file"])
                       and here["size"] - int(self._scan.get("size", 0)) > SCAN_LIMIT)
        if self._orphans and (self._since_recovery > RECENT_IDS or too_far):
            log.warning("%d entries read back from the output were never offered again; letting them go",
                        len(self._orphans))
            self._orphans.clear()
        if not self._orphans:
            self._scan = None
        return {**here, "scan": self._scan} if self._scan is not None else here

    def _remember(self, eid: str) -> None:
        if eid not in self._recent:
            self._recent.add(eid)
            self._order.append(eid)
            if len(self._order) > RECENT_IDS:
                self._recent.discard(self._order.popleft())

    def shutdown(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def stats(self) -> dict[str, Any]:
        return {"written": self.written, "duplicates_skipped": self.skipped_duplicates, "dir": str(self.directory)}
