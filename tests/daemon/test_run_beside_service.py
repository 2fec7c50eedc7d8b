"""Issue "right on day one", smaller row: `run` beside the service said only "another agent-collector is
using ...". A second collector on the same data directory now names the running one's pid and the
`service` commands that show and stop it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from collector.config import load_config
from collector.daemon.service import AlreadyRunning, Service
from collector.paths import Paths


def test_a_second_collector_names_the_pid_and_the_service_commands(tmp_path: Path) -> None:
    paths = Paths(home=tmp_path / "home", config_dir=tmp_path / "config", data_dir=tmp_path / "data")
    config = load_config(paths.config_file, env={})
    first = Service(paths, config, output_dir=paths.output_dir)
    first.startup()
    try:
        second = Service(paths, config, output_dir=paths.output_dir)
        with pytest.raises(AlreadyRunning) as raised:
            second.startup()
        message = str(raised.value)
        assert f"(pid {os.getpid()})" in message
        assert "agent-collector service status" in message and "agent-collector service stop" in message
    finally:
        first.shutdown()
    again = Service(paths, config, output_dir=paths.output_dir)  # the lock is free once the first stops
    again.startup()
    again.shutdown()
