"""A start-up that fails releases what it took: the lock and the checkpoint store."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import make_paths

from collector.config import load_config
from collector.daemon.service import Service


def test_a_failed_startup_releases_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = make_paths(tmp_path)
    paths.home.mkdir(parents=True)
    config = load_config(paths.config_file, env={})
    broken = Service(paths, config)

    def fail() -> None:
        raise RuntimeError("a plug-in that cannot be built")

    monkeypatch.setattr(broken, "_build_exporters", fail)
    with pytest.raises(RuntimeError):
        broken.startup()
    assert broken._lock.fd is None and broken._store is None
    again = Service(paths, config)  # the same process starts it again: not "already running"
    again.startup()
    again.shutdown()
