"""The usage-store exporter: on by default, next to the JSONL file (see ``collector.usage.store``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collector.exporters.base import Entry, ExportError
from collector.usage.store import StoreSettings, UsageStore, store_file


class UsageStoreExporter:
    name = "usage_store"

    def __init__(self, path: Path, retention_days: int) -> None:
        self._store = UsageStore(path, retention_days)

    def export(self, batch: Sequence[Entry]) -> None:
        try:
            self._store.add(batch)
        except sqlite3.Error as exc:
            raise ExportError(f"usage store {self._store.path}: {exc}") from exc

    def shutdown(self) -> None:
        self._store.close()

    def stats(self) -> dict[str, Any]:
        return {"written": self._store.inserted, "duplicates_skipped": self._store.duplicates,
                "pruned": self._store.pruned, "path": str(self._store.path)}


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


def build_usage_exporter(config: Any, data_dir: Path) -> UsageStoreExporter | None:
    settings = store_settings(config)
    if not settings.enabled:
        return None
    return UsageStoreExporter(store_file(data_dir, settings), settings.retention_days)
