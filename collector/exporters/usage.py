"""The usage-store exporter: on by default, next to the JSONL file (see ``collector.usage.store``)."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collector.exporters.base import Entry, ExportError
from collector.usage.rebuild import last_rebuild, rebuild, set_aside, store_problem
from collector.usage.store import StoreSettings, UsageStore, store_file

log = logging.getLogger(__name__)

# Errors of the data, not of the database: the transaction is rolled back, nothing of the batch is kept.
_DATA_ERRORS = (sqlite3.InterfaceError, sqlite3.ProgrammingError, sqlite3.DataError, sqlite3.IntegrityError,
                OverflowError)


class UsageStoreExporter:
    """A store that cannot be opened (a disk already full at start-up) does not stop the daemon: the
    exporter refuses batches (retryable: the delivery chain holds them and ``status`` shows why) and tries
    to open the store again with each one, so it recovers when space returns."""

    name = "usage_store"

    def __init__(self, path: Path, retention_days: int, output_dir: Path | None = None) -> None:
        self.path = path
        self._retention_days = retention_days
        self._output_dir = output_dir  # the JSONL output a missing or damaged store is rebuilt from
        self._store: UsageStore | None = None
        self.rebuilt: dict[str, Any] | None = None
        self.error: str | None = None
        with contextlib.suppress(ExportError):  # logged; the first batch tries again
            self._open()

    def _open(self) -> UsageStore:
        if self._store is None:
            try:
                self._store = self._open_or_rebuild()
            except (sqlite3.Error, OSError) as exc:
                reason = getattr(exc, "strerror", None) or str(exc)
                if self.error is None:
                    log.error("usage store %s cannot be opened (%s); entries wait until it can", self.path, reason)
                self.error = reason
                raise ExportError(f"usage store {self.path} cannot be opened: {reason}") from exc
            if self.error is not None:
                log.info("usage store %s opened", self.path)
            self.error = None
        return self._store

    def _open_or_rebuild(self) -> UsageStore:
        problem = store_problem(self.path) if self._output_dir is not None else None
        aside = set_aside(self.path) if problem and problem != "missing" else None
        if aside is not None:
            log.error("usage store %s is %s; moved aside to %s", self.path, problem, aside)
        store = UsageStore(self.path, self._retention_days)
        try:
            if problem and self._output_dir is not None:
                rebuild(store, self._output_dir, problem, aside)
            self.rebuilt = last_rebuild(store)
        except BaseException:
            store.close()
            raise
        return store

    def export(self, batch: Sequence[Entry]) -> None:
        """A failing database (full, locked, unreadable) refuses the batch for later; an error an entry
        causes (a value SQLite cannot bind or store) is raised as is, so the delivery chain finds that
        entry and quarantines it (``collector.daemon.delivery``) instead of holding the batch for ever."""
        store = self._open()
        try:
            store.add(batch)
        except _DATA_ERRORS:
            raise
        except sqlite3.Error as exc:
            raise ExportError(f"usage store {self.path}: {exc}") from exc

    def shutdown(self) -> None:
        if self._store is not None:
            self._store.close()

    def stats(self) -> dict[str, Any]:
        store = self._store
        stats: dict[str, Any] = {"written": store.inserted if store else 0,
                                 "duplicates_skipped": store.duplicates if store else 0,
                                 "corrected": store.corrected if store else 0,  # docs/merge.md
                                 "pruned": store.pruned if store else 0, "path": str(self.path)}
        if self.error is not None:
            stats["error"] = self.error
        if self.rebuilt is not None:
            stats["rebuilt"] = self.rebuilt
        return stats


def store_settings(config: Any) -> StoreSettings:
    """The ``[store]`` section, from the typed config or a plain dict."""
    section = config.get("store", {}) if isinstance(config, dict) else getattr(config, "store", None)
    if section is None:
        return StoreSettings()

    def get(key: str, default: Any) -> Any:
        return section.get(key, default) if isinstance(section, dict) else getattr(section, key, default)

    path = get("path", "")
    return StoreSettings(enabled=bool(get("enabled", True)), path=Path(path).expanduser() if path else None,
                         retention_days=int(get("retention_days", 0)))


def build_usage_exporter(config: Any, data_dir: Path, output_dir: Path | None = None) -> UsageStoreExporter | None:
    settings = store_settings(config)
    if not settings.enabled:
        return None
    return UsageStoreExporter(store_file(data_dir, settings), settings.retention_days, output_dir)
